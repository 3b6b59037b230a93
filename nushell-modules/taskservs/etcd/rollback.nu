# Rolls etcd back on this server: stops the member and removes its data directory and log.
# (Every member of a cluster is rolled back the same way; the cluster is gone with them.)
export def main [exec: closure, ctx: record] {
    do $exec r#'
        pkill -x etcd || true
        for i in $(seq 50); do
            pgrep -x etcd >/dev/null || break
            sleep 0.2
        done
        pkill -9 -x etcd || true
        sleep 0.2
        if pgrep -x etcd >/dev/null; then echo "etcd is still running" >&2; exit 1; fi
        rm -rf /var/lib/etcd/default /var/log/etcd.log
    '# | ignore
}
