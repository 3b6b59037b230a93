# Installs containerd on the server: starts the binary from the image in the background
# (logs in /var/log/containerd.log) unless `ctr version` already reaches it, and waits
# (bounded) until it answers. There is no download fallback: without the binary in the
# image this fails and says so. Returns `ctr version`'s answer.
export def main [exec: closure, ctx: record] {
    do $exec r#'
        if ! command -v containerd >/dev/null; then
            echo "containerd is not installed in the image and cannot be downloaded here (no network): rebuild the image with it (scripts/build-base-image.sh includes it)" >&2
            exit 1
        fi
        ctr version >/dev/null 2>&1 && exit 0
        pid=$(pgrep -x containerd | head -n 1)
        if [ -z "$pid" ]; then
            nohup containerd >>/var/log/containerd.log 2>&1 </dev/null &
            pid=$!
        fi
        for i in $(seq 60); do
            ctr version >/dev/null 2>&1 && exit 0
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
        echo "containerd did not answer; its log:" >&2
        tail -n 20 /var/log/containerd.log >&2
        exit 1
    '#
    do $exec "ctr version" | str trim
}
