# UpCloud provider: servers through UpCloud's API 1.3, commands over SSH.
#
# The four commands of the provider contract (docs/extensions.md). Settings, in order of
# precedence: the server's own entry, [provider_settings.upcloud] of the infra (from
# `ctx`, or from $env.ORCH_PARAMS for the commands that get no `ctx`), the environment
# (credentials, UPCLOUD_API_URL), then the [config] defaults of manifest.toml.
#
# A server create-server creates in a workflow carries the label
# provisioning-created-by=<workflow>/<step>, set in the create request itself; in a workflow
# (`ctx.workflow` set), delete-server deletes only a server carrying the calling step's
# label: a compensation never deletes a server it found already there.
#
# Tested against tests/standins/cloud_standin.py, a local stand-in that checks requests
# against the API's published shapes, because the real API cannot be reached from the test
# machines (see docs/providers.md). Settings lookup, durations, marks, polling and SSH come
# from ../shared (shared with the aws provider).

use ../shared *

const MANIFEST = path self manifest.toml
# The label marking what a workflow step created.
const CREATED_BY = "provisioning-created-by"

# Creates the server unless one with this hostname exists, and waits until it is started
# (and, with wait_for_ssh, until SSH answers).
export def create-server [server: record, ctx: record]: nothing -> record {
    let cfg = upcloud-config $server $ctx
    let found = find-server $cfg $server.hostname
    let details = if $found == null {
        (upcloud-call $cfg POST /server (create-body $cfg $server (mark-of $ctx))).server
    } else {
        server-details $cfg $found.uuid
    }
    let details = ensure-started $cfg $details
    let result = {
        hostname: $server.hostname
        provider: "upcloud"
        id: $details.uuid
        address: (public-ipv4 $details)
        state: $details.state
    }
    if $cfg.wait_for_ssh {
        if $result.address == null {
            error make {msg: $"UpCloud server ($server.hostname) \(($details.uuid)) has no public IPv4 address to reach over SSH"}
        }
        wait-ssh ($cfg | insert address $result.address) $"UpCloud server ($server.hostname) \(($result.address)) started"
    }
    $result
}

# Stops (hard) and deletes the server with this hostname and its storages; nothing to do
# when there is none. In a workflow, only a server the calling step created (its label) is
# deleted; another is kept. Returns {hostname, deleted, reason}.
export def delete-server [server: record, ctx: record]: nothing -> record {
    let cfg = upcloud-config $server $ctx
    let found = find-server $cfg $server.hostname
    if $found == null { return {hostname: $server.hostname, deleted: false, reason: "missing"} }
    let owner = $found | get -o labels.label | default [] | where key == $CREATED_BY | get -o 0.value
    let kept = kept-reason $found.uuid $owner (mark-of $ctx)
    if $kept != null { return {hostname: $server.hostname, deleted: false, reason: $kept} }
    let uuid = $found.uuid
    mut details = server-details $cfg $uuid
    if $details.state == "maintenance" {
        $details = wait-state $cfg $uuid [started stopped error]
    }
    if $details.state != "stopped" {
        upcloud-call $cfg POST $"/server/($uuid)/stop" {stop_server: {stop_type: "hard", timeout: "60"}} | ignore
        wait-state $cfg $uuid [stopped] | ignore
    }
    let resp = upcloud-request $cfg DELETE $"/server/($uuid)?storages=1"
    # 404: deleted meanwhile by someone else, which is what was asked.
    if $resp.status >= 400 and $resp.status != 404 {
        api-error DELETE $"/server/($uuid)?storages=1" $resp
    }
    {hostname: $server.hostname, deleted: true, reason: $"deleted ($uuid)"}
}

# Runs `sh -c command` on the server over SSH (to its public IPv4 address).
#
# NOT TESTED against a real server: the test machines cannot reach UpCloud. The tests run
# this with a fake `ssh` on PATH that records its arguments and runs the command locally,
# which checks the command line built here, not a real SSH session.
export def server-exec [server: record, command: string]: nothing -> string {
    let cfg = upcloud-config $server
    let address = if ($server.address? | is-not-empty) {
        $server.address
    } else {
        let found = find-server $cfg $server.hostname
        if $found == null {
            error make {msg: $"UpCloud server ($server.hostname) does not exist"}
        }
        let ip = public-ipv4 (server-details $cfg $found.uuid)
        if $ip == null {
            error make {msg: $"UpCloud server ($server.hostname) \(($found.uuid)) has no public IPv4 address"}
        }
        $ip
    }
    ssh-exec ($cfg | insert address $address) $server.hostname upcloud $command
}

# {hostname, exists, state}: state is UpCloud's (started, stopped, maintenance, error) or
# "missing".
export def server-status [server: record]: nothing -> record {
    let cfg = upcloud-config $server
    let found = find-server $cfg $server.hostname
    if $found == null {
        {hostname: $server.hostname, exists: false, state: "missing"}
    } else {
        {hostname: $server.hostname, exists: true, state: (server-details $cfg $found.uuid).state}
    }
}

# --- configuration ---------------------------------------------------------------------

def upcloud-config [server: record, ctx?: record]: nothing -> record {
    let pick = settings-picker upcloud $MANIFEST $server $ctx
    let duration = {|key, fallback| to-duration (do $pick $key null | default $fallback) $key "UpCloud provider" }
    let token = do $pick token $env.UPCLOUD_TOKEN?
    let username = do $pick username $env.UPCLOUD_USERNAME?
    let password = do $pick password $env.UPCLOUD_PASSWORD?
    let authorization = if ($token | is-not-empty) {
        $"Bearer ($token)"
    } else if ($username | is-not-empty) and ($password | is-not-empty) {
        $"Basic ($"($username):($password)" | encode base64)"
    } else {
        null   # reported by the first API request (server-exec to a known address needs none)
    }
    let endpoint = do $pick endpoint $env.UPCLOUD_API_URL? | default "https://api.upcloud.com/1.3"
    {
        endpoint: ($endpoint | str trim --right --char "/")
        headers: (if $authorization == null { null } else { {Authorization: $authorization, Accept: "application/json"} })
        zone: (do $pick zone null | default "fi-hel1")
        plan: (do $pick plan null | default "1xCPU-1GB")
        template: (do $pick template null | default "01000000-0000-4000-8000-000030240200")
        storage_size: (do $pick storage_size null | default 25 | into int)
        storage_tier: (do $pick storage_tier null | default "maxiops")
        ssh_keys: (do $pick ssh_keys null | as-string-list)
        user: (do $pick user null | default "root")
        ssh_key: (do $pick ssh_key null)
        ssh_port: (do $pick ssh_port null | default 22)
        timeout: (do $duration timeout "10m")
        poll_interval: (do $duration poll_interval "5s")
        http_timeout: (do $duration http_timeout "30s")
        wait_for_ssh: (do $pick wait_for_ssh null | default true)
        ssh_timeout: (do $duration ssh_timeout "5m")
    }
}

# The POST /server body (API 1.3 "Create server").
def create-body [cfg: record, server: record, mark: any]: nothing -> record {
    let infra = $server.infra? | default ""
    mut body = {
        zone: $cfg.zone
        title: $server.hostname
        hostname: $server.hostname
        plan: $cfg.plan
        metadata: "yes"                 # cloud-init templates need the metadata service
        password_delivery: "none"
        labels: {label: ([[key value]; [managed-by provisioning] [provisioning-infra $infra] [$CREATED_BY ($mark | default "")]] | where value != "")}
        networking: {interfaces: {interface: [
            {type: "public", ip_addresses: {ip_address: [{family: "IPv4"}]}}
            {type: "utility", ip_addresses: {ip_address: [{family: "IPv4"}]}}
        ]}}
        storage_devices: {storage_device: [{
            action: "clone"
            storage: $cfg.template
            title: $"($server.hostname) OS disk"
            size: $cfg.storage_size
            tier: $cfg.storage_tier
        }]}
    }
    if ($cfg.ssh_keys | is-not-empty) {
        $body = $body | insert login_user {
            username: $cfg.user
            create_password: "no"
            ssh_keys: {ssh_key: $cfg.ssh_keys}
        }
    }
    {server: $body}
}

# --- API -------------------------------------------------------------------------------

# One API request: {status, body}; transport failures (refused, timeout) are errors.
def upcloud-request [cfg: record, method: string, path: string, body?: any]: nothing -> record {
    if $cfg.headers == null {
        error make {msg: ("UpCloud credentials missing: set UPCLOUD_USERNAME and UPCLOUD_PASSWORD (an API user) or UPCLOUD_TOKEN (an API token) in the environment, "
            + "or username and password (or token) in [provider_settings.upcloud]")}
    }
    let url = $"($cfg.endpoint)($path)"
    let resp = try {
        match $method {
            "GET" => { http get --full --allow-errors --max-time $cfg.http_timeout --headers $cfg.headers $url }
            "POST" => {
                if $body == null {
                    http post --full --allow-errors --max-time $cfg.http_timeout --headers $cfg.headers $url ""
                } else {
                    http post --full --allow-errors --max-time $cfg.http_timeout --headers $cfg.headers --content-type application/json $url $body
                }
            }
            "DELETE" => { http delete --full --allow-errors --max-time $cfg.http_timeout --headers $cfg.headers $url }
        }
    } catch {|e|
        error make {msg: $"UpCloud API ($method) ($path): no answer from ($url): ($e.msg)"}
    }
    {status: $resp.status, body: $resp.body}
}

# A request whose error status becomes an error; returns the (parsed JSON) body.
def upcloud-call [cfg: record, method: string, path: string, body?: any]: nothing -> any {
    let resp = upcloud-request $cfg $method $path $body
    if $resp.status >= 400 { api-error $method $path $resp }
    $resp.body
}

def api-error [method: string, path: string, resp: record] {
    let body = if ($resp.body | describe) == "string" {
        try { $resp.body | from json } catch { $resp.body }
    } else { $resp.body }
    let detail = if ($body | describe | str starts-with "record") and ($body.error? != null) {
        $"($body.error.error_code? | default 'UNKNOWN'): ($body.error.error_message? | default '')"
    } else {
        $body | to text | str substring 0..300
    }
    error make {msg: $"UpCloud API ($method) ($path) failed: HTTP ($resp.status) ($detail)"}
}

# The server (summary from GET /server) whose hostname is `hostname`, or null.
def find-server [cfg: record, hostname: string]: nothing -> any {
    let body = upcloud-call $cfg GET /server
    let servers = $body | get -o servers.server | default [] | where {|s| ($s.hostname? | default "") == $hostname }
    match ($servers | length) {
        0 => null
        1 => ($servers | first)
        _ => {
            error make {msg: $"UpCloud: ($servers | length) servers have the hostname ($hostname) \(($servers | get uuid | str join ', ')): delete the extra ones or give them other hostnames"}
        }
    }
}

def server-details [cfg: record, uuid: string]: nothing -> record {
    (upcloud-call $cfg GET $"/server/($uuid)").server
}

# Polls GET /server/{uuid} until its state is one of `states` (bounded by cfg.timeout).
def wait-state [cfg: record, uuid: string, states: list<string>] {
    poll-until $cfg.timeout $cfg.poll_interval {||
        let details = server-details $cfg $uuid
        if $details.state == "error" and "error" not-in $states {
            error make {msg: $"UpCloud server ($details.hostname? | default $uuid) \(($uuid)) is in state error"}
        }
        {done: ($details.state in $states), value: $details}
    } {|last|
        $"UpCloud server ($last.value.hostname? | default $uuid) \(($uuid)) did not reach state ($states | str join ' or ') within ($cfg.timeout) \(state: ($last.value.state))"
    }
}

# Waits out maintenance and starts a stopped server: commands must be able to run on it.
def ensure-started [cfg: record, details: record]: nothing -> record {
    let details = if $details.state == "maintenance" {
        wait-state $cfg $details.uuid [started stopped]
    } else { $details }
    match $details.state {
        "started" => $details
        "stopped" => {
            upcloud-call $cfg POST $"/server/($details.uuid)/start" | ignore
            wait-state $cfg $details.uuid [started]
        }
        _ => { error make {msg: $"UpCloud server ($details.hostname? | default $details.uuid) \(($details.uuid)) is in state ($details.state)"} }
    }
}

# The public IPv4 address from server details (ip_addresses, or networking in newer
# answers), or null.
def public-ipv4 [details: record]: nothing -> any {
    let listed = $details | get -o ip_addresses.ip_address | default []
    let from_networking = $details | get -o networking.interfaces.interface | default []
        | where {|i| ($i.type? | default "") == "public" }
        | each {|i| $i | get -o ip_addresses.ip_address | default [] | each {|a| $a | insert access "public" } }
        | flatten
    let addresses = $listed | append $from_networking
        | where {|a| ($a.access? | default "") == "public" and ($a.family? | default "IPv4") == "IPv4" and ($a.address? | is-not-empty) }
    if ($addresses | is-empty) { null } else { ($addresses | first).address }
}
