# Tests etcd for real: puts a key on this member and reads it back from every member
# (through its advertised client URL, so the write must have been replicated), then
# deletes it. Returns {key, value, read_from}.
export def main [exec: closure, ctx: record] {
    let me = (do $exec "hostname" | str trim)
    let members = if ($ctx.cluster? | default null) == null { [$me] } else {
        $ctx.cluster.nodes | where {|n| "etcd" in ($n.taskservs? | default []) } | get hostname
    }
    let key = $"/provisioning-test/($me)/(random chars --length 8)"
    let value = (random uuid)
    let ctl = "ETCDCTL_API=3 etcdctl --command-timeout=5s"
    do $exec $"($ctl) --endpoints=http://127.0.0.1:2379 put ($key) ($value)" | ignore
    for m in $members {
        let got = (do $exec $"($ctl) --endpoints=http://($m):2379 get --print-value-only ($key)" | str trim)
        if $got != $value {
            error make {msg: $"etcd test: wrote `($value)` to ($key) on ($me) but read `($got)` from ($m)"}
        }
    }
    do $exec $"($ctl) --endpoints=http://127.0.0.1:2379 del ($key)" | ignore
    {key: $key, value: $value, read_from: $members}
}
