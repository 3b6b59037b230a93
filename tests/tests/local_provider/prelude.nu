# Helpers for the local provider's end-to-end tests (tests/tests/local_provider.rs puts
# this in front of each test's script, with the placeholders replaced).
const MODULES = '@MODULES@'
const INFRA = '@INFRA@'
use '@MODULES@/providers/local'

# A server entry of the test's infra, as the orchestrator hands it to the provider.
def server [hostname: string]: nothing -> record {
    {hostname: $hostname, provider: "local", infra: $INFRA}
}

# The step context for a server (plus `extra` fields such as `cluster`).
def ctx-for [server: record, extra: record = {}]: nothing -> record {
    {
        workflow: 0
        step: $"e2e@($server.hostname)"
        infra: {name: $INFRA, dir: "", settings: {name: $INFRA, provider: "local"}}
        server: $server
    } | merge $extra
}

# Runs one taskserv script (install, check, test, rollback) as a workflow step does: in
# its own `nu`, with the context in $env.ORCH_PARAMS and a closure running commands on
# the server through the provider. Returns the script's value; fails with its error.
def step [action: string, taskserv: string, server: record, extra: record = {}]: nothing -> any {
    let dir = $"($MODULES)/taskservs/($taskserv)"
    let ctx = (ctx-for $server $extra | insert taskserv {
        name: $taskserv, version: (open $"($dir)/manifest.toml").version, dir: $dir
    })
    let program = [
        $"use '($MODULES)/providers/local'"
        $"use '($dir)/($action).nu'"
        "let ctx = ($env.ORCH_PARAMS | from json)"
        "try {"
        $"    {ok: true, value: \(($action) {|cmd| local server-exec $ctx.server $cmd } $ctx\)}"
        "} catch {|e| {ok: false, error: $e.msg} } | to json -r"
    ] | str join "\n"
    let r = (with-env {ORCH_PARAMS: ($ctx | to json -r)} { ^$nu.current-exe -n -c $program | complete })
    if $r.exit_code != 0 {
        error make {msg: $"($action) ($taskserv) on ($server.hostname): nu failed: ($r.stderr)"}
    }
    let result = ($r.stdout | from json)
    if not $result.ok {
        error make {msg: $"($action) ($taskserv) on ($server.hostname): ($result.error)"}
    }
    $result.value
}

# The error message of a closure that must fail.
def error-of [what: string, body: closure]: nothing -> string {
    let msg = (try { do $body; null } catch {|e| $e.msg })
    if $msg == null { error make {msg: $"($what) succeeded, but it must fail"} }
    $msg
}

# Fails unless `got` equals `want`.
def expect [what: string, got: any, want: any] {
    if $got != $want {
        error make {msg: $"($what): got ($got | to nuon), want ($want | to nuon)"}
    }
}

# Fails unless `text` contains `needle`.
def expect-contains [what: string, text: string, needle: string] {
    if not ($text | str contains $needle) {
        error make {msg: $"($what): `($needle)` is not in: ($text)"}
    }
}
