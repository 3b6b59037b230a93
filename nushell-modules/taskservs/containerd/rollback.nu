# Rolls containerd back: stops it and removes its state and data.
export def main [exec: closure, ctx: record] {
    do $exec r#'
        pkill -x containerd || true
        for i in $(seq 50); do
            pgrep -x containerd >/dev/null || break
            sleep 0.2
        done
        pkill -9 -x containerd || true
        sleep 0.2
        if pgrep -x containerd >/dev/null; then echo "containerd is still running" >&2; exit 1; fi
        rm -rf /var/lib/containerd /run/containerd /var/log/containerd.log
    '# | ignore
}
