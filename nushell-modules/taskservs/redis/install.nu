# Installs redis on the server: starts redis-server daemonized, listening on all addresses
# (protected mode off: other servers of the infra connect by hostname), unless it already
# answers. Waits (bounded) until it answers PONG and returns that answer.
export def main [exec: closure, ctx: record] {
    do $exec r#'
        command -v redis-server >/dev/null || { echo "redis-server is not installed in the image" >&2; exit 1; }
        redis-cli ping 2>/dev/null | grep -q PONG && exit 0
        mkdir -p /var/lib/redis /var/log/redis /run/redis
        redis-server --daemonize yes --bind 0.0.0.0 --protected-mode no --port 6379 \
            --dir /var/lib/redis --pidfile /run/redis/redis-server.pid \
            --logfile /var/log/redis/redis-server.log
        for i in $(seq 50); do
            redis-cli ping 2>/dev/null | grep -q PONG && exit 0
            sleep 0.2
        done
        echo "redis-server did not answer PONG within 10 s; its log:" >&2
        tail -n 20 /var/log/redis/redis-server.log >&2
        exit 1
    '#
    do $exec "redis-cli ping" | str trim
}
