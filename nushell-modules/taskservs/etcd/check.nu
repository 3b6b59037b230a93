# Checks that this etcd member is healthy (`etcdctl endpoint health`, which needs the
# cluster's quorum); retries for up to 60 s while a cluster forms. Returns the answer.
export def main [exec: closure, ctx: record] {
    do $exec r#'
        export ETCDCTL_API=3
        for i in $(seq 120); do
            out=$(etcdctl --endpoints=http://127.0.0.1:2379 --command-timeout=2s endpoint health 2>&1) && { echo "$out"; exit 0; }
            sleep 0.5
        done
        echo "$out" >&2
        exit 1
    '# | str trim
}
