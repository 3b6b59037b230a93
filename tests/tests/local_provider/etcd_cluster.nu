# Three servers form one etcd cluster from ctx.cluster; a key written on one member is
# read on another; rollback and deletion.
let nodes = ([etcd-1 etcd-2 etcd-3] | each {|h| {hostname: $h, role: member, taskservs: [etcd]} })
let cluster = {cluster: {name: "etcd", definition: "etcd-cluster", nodes: $nodes}}
let servers = ($nodes | each {|n| server $n.hostname })
$servers | par-each {|s| local create-server $s (ctx-for $s $cluster) } | ignore
# Installed one after the other, as dependent steps would be: a member does not wait
# for the quorum, so this does not deadlock.
let installed = ($servers | each {|s| step install etcd $s $cluster })
let checks = ($servers | each {|s| step check etcd $s $cluster })
$checks | each {|c| expect-contains "etcd health" $c "is healthy" } | ignore
let test = (step test etcd ($servers | first) $cluster)
expect "etcd test read from" $test.read_from [etcd-1 etcd-2 etcd-3]
let members = (local server-exec ($servers | first) "ETCDCTL_API=3 etcdctl member list -w json" | from json | get members.name | sort)
expect "members" $members [etcd-1 etcd-2 etcd-3]
# Written on etcd-1, read on etcd-3 (through its own local endpoint).
local server-exec ($servers | first) "ETCDCTL_API=3 etcdctl put /e2e/shared written-on-etcd-1" | ignore
let read = (local server-exec ($servers | last) "ETCDCTL_API=3 etcdctl --endpoints=http://127.0.0.1:2379 get --print-value-only /e2e/shared" | str trim)
expect "read on etcd-3" $read "written-on-etcd-1"
$servers | each {|s| step rollback etcd $s $cluster } | ignore
let left = ($servers | each {|s| local server-exec $s "pgrep -x etcd | wc -l; ls -A /var/lib/etcd | wc -l" | lines | str trim })
expect "etcd processes and data after rollback" $left [["0" "0"] ["0" "0"] ["0" "0"]]
$servers | par-each {|s| local delete-server $s (ctx-for $s $cluster) } | ignore
expect "listed after delete" (local list-servers $INFRA) []
{installed: $installed, checks: $checks, test: $test, members: $members, read_on_etcd_3: $read} | to json -r
