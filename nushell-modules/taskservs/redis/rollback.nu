# Rolls redis back: shuts it down without saving (when it runs) and removes its data.
export def main [exec: closure, ctx: record] {
    do $exec r#'
        if redis-cli ping >/dev/null 2>&1; then
            redis-cli shutdown nosave >/dev/null 2>&1 || true
        fi
        for i in $(seq 50); do
            pgrep -x redis-server >/dev/null || break
            sleep 0.2
        done
        if pgrep -x redis-server >/dev/null; then echo "redis-server is still running after shutdown" >&2; exit 1; fi
        rm -rf /var/lib/redis/* /run/redis/redis-server.pid
    '# | ignore
}
