# Runs once every member is installed and healthy: the cluster must have all its members
# and replicate a write made on the first member to the last one.
export def main [exec: closure, ctx: record] {
    let nodes = ($ctx.cluster.nodes | get hostname)
    let first = ($nodes | first)
    let last = ($nodes | last)
    let members = (do $exec $first "etcdctl member list" | lines | length)
    if $members != ($nodes | length) {
        error make {msg: $"the cluster has ($members) members, expected ($nodes | length)"}
    }
    let value = $"written-on-($first)-by-workflow-($ctx.workflow? | default 0)"
    do $exec $first $"etcdctl put /provisioning/setup ($value)" | ignore
    let read = (do $exec $last "etcdctl get /provisioning/setup --print-value-only" | str trim)
    if $read != $value {
        error make {msg: $"($last) read '($read)' instead of '($value)' written on ($first)"}
    }
    {members: $members, replicated: $read}
}
