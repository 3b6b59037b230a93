# Either client drives the engine (`docker`, or `podman` as fresh CI machines have it):
# create, exec, status, list, delete; a server record that names its container is run
# there (the daemon's test environments name theirs); a hostile hostname is refused.
let web = (server web-01)
expect "state" (local create-server $web (ctx-for $web)).state running
expect "hostname" (local server-exec $web "hostname" | str trim) "web-01"
let named = {hostname: elsewhere, container: $"($INFRA)-web-01"}
expect "the named container" (local server-exec $named "hostname" | str trim) "web-01"
expect "listed" (local list-servers $INFRA | get hostname) [web-01]
let hostile = (error-of "a hostile hostname" { local server-exec {hostname: "x/../y", infra: $INFRA} "true" })
expect-contains "hostile hostname" $hostile "RFC 1123"
local delete-server $web (ctx-for $web) | ignore
expect "status after delete" (local server-status $web) {hostname: web-01, exists: false, state: missing}
{client: $env.PROVISIONING_LOCAL_CLI} | to json -r
