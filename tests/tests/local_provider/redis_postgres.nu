# Two servers: redis on both (reaching each other by hostname), postgres on one; checks,
# tests, failures of commands, rollback, deletion.
let web = (server web-01)
let db = (server db-01)
let created = ([$web $db] | par-each {|s| local create-server $s (ctx-for $s) } | sort-by hostname)
expect "states" ($created | get state) [running running]
expect "providers" ($created | get provider) [local local]
# Idempotent: the same container again.
expect "create again" (local create-server $web (ctx-for $web)).id ($created | where hostname == web-01 | first).id
expect "hostname" (local server-exec $web "hostname" | str trim) "web-01"
expect "listed" (local list-servers $INFRA | get hostname | sort) [db-01 web-01]
expect "status" (local server-status $db) {hostname: db-01, exists: true, state: running}

# A failing command: the error has the exit code and the output.
let failure = (error-of "exit 3" { local server-exec $web "echo to-out; echo to-err >&2; exit 3" })
expect-contains "exec error" $failure "exited with code 3"
expect-contains "exec error" $failure "to-out"
expect-contains "exec error" $failure "to-err"
expect "stdout only" (local server-exec $web "echo out; echo err >&2") "out\n"

# redis on both, each reaching the other by hostname.
let redis = ([$web $db] | each {|s|
    {
        install: (step install redis $s)
        install_again: (step install redis $s)
        check: (step check redis $s)
        test: (step test redis $s)
    }
})
expect "redis install" ($redis | get install) [PONG PONG]
expect "redis install again" ($redis | get install_again) [PONG PONG]
expect "redis check" ($redis | get check) [PONG PONG]
expect "db-01 from web-01" (local server-exec $web "redis-cli -h db-01 ping" | str trim) "PONG"
expect "web-01 from db-01" (local server-exec $db "redis-cli -h web-01 set shared 42" | str trim) "OK"
expect "the key on web-01" (local server-exec $web "redis-cli get shared" | str trim) "42"

# postgres on db-01.
let pg = {
    install: (step install postgres $db)
    install_again: (step install postgres $db)
    check: (step check postgres $db)
    test: (step test postgres $db)
}
expect-contains "pg install" $pg.install "accepting connections"
expect-contains "pg check" $pg.check "accepting connections"
expect "pg test" $pg.test "one,two"
expect "pg listens on all addresses" (local server-exec $db "cd / && runuser -u postgres -- psql -tAc 'show listen_addresses'" | str trim) "*"

# etcd without a cluster: a lone member on web-01.
let etcd = {
    install: (step install etcd $web)
    check: (step check etcd $web)
    test: (step test etcd $web)
}
expect "lone etcd member" $etcd.test.read_from [web-01]
step rollback etcd $web

# Rollback: the services are gone with their data; a second rollback is fine.
[$web $db] | each {|s| step rollback redis $s; step rollback redis $s } | ignore
step rollback postgres $db
step rollback postgres $db
let after = {
    redis: (error-of "redis check after rollback" { step check redis $web })
    pg: (error-of "pg check after rollback" { step check postgres $db })
    clusters: (local server-exec $db "pg_lsclusters -h | wc -l" | str trim)
    redis_data: (local server-exec $web "ls -A /var/lib/redis | wc -l" | str trim)
}
expect "pg clusters after rollback" $after.clusters "0"
expect "redis data after rollback" $after.redis_data "0"

# Deletion, twice (a missing server is fine).
[$web $db] | par-each {|s| local delete-server $s (ctx-for $s) } | ignore
local delete-server $web (ctx-for $web)
expect "listed after delete" (local list-servers $INFRA) []
expect "status after delete" (local server-status $web) {hostname: web-01, exists: false, state: missing}
{created: $created, redis: $redis, postgres: $pg, etcd: $etcd, after_rollback: $after, exec_error: $failure} | to json -r
