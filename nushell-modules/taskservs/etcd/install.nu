# Installs etcd on the server: starts one member in the background (logs in
# /var/log/etcd.log, data in /var/lib/etcd/default), named after the server's hostname and
# advertising http://<hostname>:2379 (clients) and :2380 (peers); it listens on all
# addresses, as etcd binds IPs, not names. In a cluster workflow the members are every
# node of ctx.cluster whose taskservs include etcd, so the members find each other by
# hostname on the infra's network.
#
# A lone member waits (bounded) until it is healthy. A cluster member only waits until
# it listens: the cluster is healthy once a majority of members runs, which the
# following steps (check) wait for.
export def main [exec: closure, ctx: record] {
    let me = (do $exec "hostname" | str trim)
    let cluster = ($ctx.cluster? | default null)
    let members = if $cluster == null { [$me] } else {
        $cluster.nodes | where {|n| "etcd" in ($n.taskservs? | default []) } | get hostname
    }
    if $me not-in $members {
        error make {msg: $"etcd: this server \(($me)\) is not an etcd node of cluster ($cluster.name? | default '?'): ($members | str join ', ')"}
    }
    let initial = ($members | each {|m| $"($m)=http://($m):2380" } | str join ",")
    let token = ([$ctx.infra?.name? $cluster.name?] | compact | append "etcd" | str join "-")
    # Values reach the shell as variables; the script itself is a raw string.
    let vars = $"NAME='($me)'\nINITIAL_CLUSTER='($initial)'\nTOKEN='($token)'\nSINGLE='($cluster == null)'\n"
    do $exec ($vars + r#'
        command -v etcd >/dev/null || { echo "etcd is not installed in the image" >&2; exit 1; }
        export ETCDCTL_API=3
        pid=$(pgrep -x etcd | head -n 1)
        if [ -z "$pid" ]; then
            mkdir -p /var/lib/etcd
            # With an existing data dir (a step run again) etcd ignores the --initial-* flags.
            nohup etcd --name "$NAME" --data-dir /var/lib/etcd/default \
                --listen-client-urls http://0.0.0.0:2379 --advertise-client-urls "http://$NAME:2379" \
                --listen-peer-urls http://0.0.0.0:2380 --initial-advertise-peer-urls "http://$NAME:2380" \
                --initial-cluster "$INITIAL_CLUSTER" --initial-cluster-token "$TOKEN" \
                --initial-cluster-state new >>/var/log/etcd.log 2>&1 </dev/null &
            pid=$!
        fi
        for i in $(seq 60); do
            kill -0 "$pid" 2>/dev/null || { echo "etcd exited; its log:" >&2; tail -n 20 /var/log/etcd.log >&2; exit 1; }
            if [ "$SINGLE" = true ]; then
                etcdctl --endpoints=http://127.0.0.1:2379 endpoint health >/dev/null 2>&1 && exit 0
            else
                ss -ltn | grep -q ':2379 ' && exit 0
            fi
            sleep 0.5
        done
        echo "etcd did not become ready within 30 s; its log:" >&2
        tail -n 20 /var/log/etcd.log >&2
        exit 1
    '#)
    $"etcd member ($me) of ($initial)"
}
