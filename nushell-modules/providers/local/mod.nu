# The `local` provider: servers are containers on the local Docker or Podman engine.
#
# It talks to the engine's Docker-compatible HTTP API (v1.41, which Docker and Podman's
# compatibility service both serve) with `curl --unix-socket`: nu's `http` commands cannot
# use Unix sockets. Every request has a `--max-time`, so nothing here waits forever.
#
# A server `web-01` of the infra `shop` is the container `shop-web-01`, with hostname
# `web-01`, on the network `shop-net` where `web-01` is also its DNS alias: the servers of
# one infra reach each other by hostname. Containers and networks carry the labels
# `provisioning.infra`, `provisioning.server` and `provisioning.provider=local`.
#
# What a workflow step creates carries its mark, `provisioning.created-by=<workflow>/<step>`,
# set in the create request itself (so a crash cannot leave it unmarked); a container found
# already there is used as it is and keeps its mark. In a workflow (`ctx.workflow` set),
# delete-server removes only a container carrying the mark of the calling step: a
# compensation undoes what its own step created, never what it found.
#
# The engine: `$env.DOCKER_HOST` (unix:// only), else the first socket that answers among
# /run/podman/podman.sock, /var/run/docker.sock and $XDG_RUNTIME_DIR/podman/podman.sock.
# The image: the server's `image`, else `provider_settings.local.image` of the infra's
# settings, else `$env.PROVISIONING_BASE_IMAGE`, else the one scripts/build-base-image.sh
# builds.

const API = "v1.41"
const DEFAULT_IMAGE = "localhost/provisioning-base:bookworm"
# Seconds a plain API request may take.
const REQUEST_TIMEOUT = 60
# Seconds a command run by `server-exec` may take (override: PROVISIONING_LOCAL_EXEC_TIMEOUT).
const EXEC_TIMEOUT = 900

# ---------------------------------------------------------------------------------------
# The engine

# Whether an engine answers `/_ping` on this socket.
def answers [socket: string]: nothing -> bool {
    if not ($socket | path exists) { return false }
    let r = (^curl -s --max-time 3 --unix-socket $socket http://d/_ping | complete)
    $r.exit_code == 0 and ($r.stdout | str trim) == "OK"
}

# The engine's Unix socket, or an error saying what was tried.
def engine-socket []: nothing -> string {
    let host = ($env.DOCKER_HOST? | default "")
    if $host != "" {
        if not ($host | str starts-with "unix://") {
            error make {msg: $"DOCKER_HOST=($host) is not supported by the local provider: only unix:// sockets are \(it talks to the engine with curl --unix-socket\)"}
        }
        let socket = ($host | str replace "unix://" "")
        if not (answers $socket) {
            error make {msg: $"no container engine answers on DOCKER_HOST=($host) \(GET /_ping\); start one with scripts/ensure-podman.sh"}
        }
        return $socket
    }
    let candidates = (
        [/run/podman/podman.sock /var/run/docker.sock]
        | append (if ($env.XDG_RUNTIME_DIR? | is-not-empty) { [$"($env.XDG_RUNTIME_DIR)/podman/podman.sock"] } else { [] })
    )
    let found = ($candidates | where {|s| answers $s } | first 1)
    if ($found | is-empty) {
        error make {msg: $"no container engine found: DOCKER_HOST is unset and none of ($candidates | str join ', ') answers GET /_ping; start one with scripts/ensure-podman.sh or set DOCKER_HOST=unix:///path/to/engine.sock"}
    }
    $found | first
}

# One API request: `{status: int, body: binary}`. `body` (any value) is sent as JSON.
# Only a transport failure (no answer, timeout) is an error; HTTP errors are returned.
def request [
    socket: string
    method: string
    path: string          # after /v1.41, with its query string
    body?: any
    --timeout: int = $REQUEST_TIMEOUT  # seconds
]: nothing -> record<status: int, body: binary> {
    let data = if $body == null { [] } else {
        [-H "Content-Type: application/json" --data-binary ($body | to json -r)]
    }
    # The status code goes on a last line of its own after the body.
    let r = (
        ^curl -sS --max-time $timeout --unix-socket $socket -X $method ...$data
            -w "\n%{http_code}" $"http://d/($API)($path)"
        | complete
    )
    if $r.exit_code != 0 {
        error make {msg: $"container engine request ($method) ($path) failed: ($r.stderr | str trim) \(curl exit ($r.exit_code)\)"}
    }
    let raw = ($r.stdout | into binary)
    let n = ($raw | bytes length)
    {
        status: ($raw | bytes at ($n - 3).. | decode utf-8 | into int)
        body: ($raw | bytes at 0..<($n - 4))
    }
}

# A name (container, network, image, exec id) as one URL path segment or query value:
# every character but letters and digits is percent-encoded, so a `/` or `..` in a name
# can never reach another API path.
def seg [name: string]: nothing -> string {
    $name | url encode --all
}

# The engine's message in an error answer (its JSON `message`, else the raw body).
def message-of [response: record]: nothing -> string {
    let text = ($response.body | decode utf-8)
    try { $text | from json | get message } catch { $text | str trim }
}

# A request whose answer must have one of the `ok` statuses; returns the parsed JSON body
# (null when empty). Anything else is an error with the engine's message.
def call [
    socket: string
    method: string
    path: string
    body?: any
    --ok: list<int> = [200 201 204]
    --timeout: int = $REQUEST_TIMEOUT
]: nothing -> any {
    let r = (request $socket $method $path $body --timeout $timeout)
    if $r.status not-in $ok {
        error make {msg: $"container engine: ($method) ($path) answered ($r.status): (message-of $r)"}
    }
    if ($r.body | bytes length) == 0 { null } else { $r.body | decode utf-8 | from json }
}

# ---------------------------------------------------------------------------------------
# Names and inspection

# The infra a server belongs to: the server record's `infra`, else the step context's
# (`ctx`, or $env.ORCH_PARAMS / ORCH_PARAMS_FILE for the commands that get no ctx).
def infra-of [server: record, ctx?: record]: nothing -> string {
    let params = $env.ORCH_PARAMS? | default (if ($env.ORCH_PARAMS_FILE? | is-not-empty) { open --raw $env.ORCH_PARAMS_FILE } else { "" })
    let ctx = ($ctx | default (try { $params | from json } catch { {} }))
    let infra = ($server.infra? | default ($ctx.infra?.name?))
    if ($infra | is-empty) {
        error make {msg: $"server ($server.hostname): no `infra` in the server record or the step context"}
    }
    $infra
}

def container-name [server: record]: nothing -> string {
    $"(infra-of $server)-($server.hostname)"
}

def network-name [infra: string]: nothing -> string { $"($infra)-net" }

# The mark of what the step of `ctx` creates (`<workflow>/<step>`), or null outside a
# workflow.
def mark-of [ctx: record]: nothing -> any {
    if $ctx.workflow? == null { null } else { $"($ctx.workflow)/($ctx.step? | default '')" }
}

# The workflow part of a mark (the network is shared by a workflow's steps).
def workflow-of [mark: any]: nothing -> any {
    if $mark == null { null } else { $mark | split row "/" | first }
}

# The container's inspect record, or null when it does not exist.
def inspect [socket: string, name: string]: nothing -> any {
    let r = (request $socket GET $"/containers/(seg $name)/json")
    match $r.status {
        200 => ($r.body | decode utf-8 | from json)
        404 => null
        _ => { error make {msg: $"container engine: inspecting ($name) answered ($r.status): (message-of $r)"} }
    }
}

# The record create-server returns, from an inspect record.
def describe-server [server: record, info: record]: nothing -> record {
    let net = (network-name (infra-of $server))
    {
        hostname: $server.hostname
        provider: "local"
        id: $info.Id
        address: ($info.NetworkSettings?.Networks? | get -o $net | get -o IPAddress | default "")
        state: $info.State.Status
    }
}

# The image for a server (see the header), checked to exist locally.
def image-for [socket: string, server: record, ctx: record]: nothing -> string {
    let image = (
        $server.image?
        | default ($ctx.infra?.settings?.provider_settings?.local?.image?)
        | default ($env.PROVISIONING_BASE_IMAGE?)
        | default $DEFAULT_IMAGE
    )
    let r = (request $socket GET $"/images/(seg $image)/json")
    if $r.status == 404 {
        error make {msg: $"image ($image) does not exist in the local container engine \(no registry is used\): build it with scripts/build-base-image.sh \(PROVISIONING_BASE_IMAGE=($image) for another name\)"}
    }
    if $r.status != 200 {
        error make {msg: $"container engine: inspecting image ($image) answered ($r.status): (message-of $r)"}
    }
    $image
}

# Creates the infra's network unless it exists (another step may create it concurrently),
# marked with the creating workflow (`provisioning.created-by-workflow`).
def ensure-network [socket: string, infra: string, mark: any]: nothing -> string {
    let net = (network-name $infra)
    if (request $socket GET $"/networks/(seg $net)").status == 200 { return $net }
    let labels = {"provisioning.infra": $infra, "provisioning.provider": "local"}
    let labels = if $mark == null { $labels } else { $labels | insert "provisioning.created-by-workflow" (workflow-of $mark) }
    let r = (request $socket POST /networks/create {Name: $net, Labels: $labels})
    # Podman answers 500 "already exists" when it lost a race: the network is there.
    if $r.status != 201 and (request $socket GET $"/networks/(seg $net)").status != 200 {
        error make {msg: $"container engine: creating network ($net) answered ($r.status): (message-of $r)"}
    }
    $net
}

# ---------------------------------------------------------------------------------------
# Exec

# Splits a multiplexed attach stream (8-byte frame headers: stream, 0, 0, 0, size BE)
# into its stdout and stderr.
def demux [raw: binary]: nothing -> record<stdout: string, stderr: string> {
    let n = ($raw | bytes length)
    mut out = []
    mut err = []
    mut i = 0
    while $i + 8 <= $n {
        let stream = ($raw | bytes at $i..$i | into int)
        let size = ($raw | bytes at ($i + 4)..($i + 7) | into int --endian big)
        let chunk = ($raw | bytes at ($i + 8)..<($i + 8 + $size))
        if $stream == 2 { $err = ($err | append $chunk) } else { $out = ($out | append $chunk) }
        $i = $i + 8 + $size
    }
    {
        stdout: ($out | bytes collect | decode utf-8)
        stderr: ($err | bytes collect | decode utf-8)
    }
}

# Runs `sh -c command` in a running container: {exit_code, stdout, stderr}.
def exec-in [socket: string, name: string, command: string, --timeout: int]: nothing -> record {
    let timeout = ($timeout | default ($env.PROVISIONING_LOCAL_EXEC_TIMEOUT? | default $EXEC_TIMEOUT | into int))
    let created = (request $socket POST $"/containers/(seg $name)/exec" {
        AttachStdin: false, AttachStdout: true, AttachStderr: true, Tty: false
        Cmd: ["sh" "-c" $command]
    })
    match $created.status {
        201 => {}
        404 => { error make {msg: $"server container ($name) does not exist \(create-server first\)"} }
        409 => { error make {msg: $"server container ($name) is not running: (message-of $created)"} }
        _ => { error make {msg: $"container engine: creating exec in ($name) answered ($created.status): (message-of $created)"} }
    }
    let exec = ($created.body | decode utf-8 | from json)
    # Without a TTY the answer is the multiplexed stream, ending when the command ends.
    let r = (request $socket POST $"/exec/(seg $exec.Id)/start" {Detach: false, Tty: false} --timeout $timeout)
    if $r.status != 200 {
        error make {msg: $"container engine: starting exec in ($name) answered ($r.status): (message-of $r)"}
    }
    let output = (demux $r.body)
    # The exit code is recorded right after the stream ends; allow it a moment.
    mut info = (call $socket GET $"/exec/(seg $exec.Id)/json")
    for _ in 1..20 {
        if not $info.Running and $info.ExitCode != null { break }
        sleep 100ms
        $info = (call $socket GET $"/exec/(seg $exec.Id)/json")
    }
    $output | insert exit_code $info.ExitCode
}

# A command in one line for messages: its first line, shortened (scripts can be long).
def summary [command: string]: nothing -> string {
    let lines = ($command | lines | str trim | where {|l| $l != "" })
    let first = ($lines | get -o 0 | default "")
    if ($lines | length) > 1 or ($first | str length) > 80 {
        $"($first | str substring 0..<80) …"
    } else { $first }
}

# Waits until commands run in the container (bounded); fails early when it stopped.
def wait-ready [socket: string, name: string] {
    for _ in 1..60 {
        let ok = (try { (exec-in $socket $name "true" --timeout 10).exit_code == 0 } catch { false })
        if $ok { return }
        let state = (inspect $socket $name | get -o State)
        if $state == null or not $state.Running {
            error make {msg: $"container ($name) is not running \(state ($state.Status? | default missing), exit code ($state.ExitCode? | default '-')\): see `podman logs ($name)` \(or `docker logs`\)"}
        }
        sleep 500ms
    }
    error make {msg: $"container ($name) started but commands do not run in it after 30 s"}
}

# ---------------------------------------------------------------------------------------
# The provider commands (docs/extensions.md)

# Create the server's container (and its infra's network) unless it exists, start it,
# and wait until commands run in it. Returns {hostname, provider, id, address, state}.
# A container this call creates carries the step's mark (see the header); one found
# already there is adopted as it is.
export def create-server [server: record, ctx: record]: nothing -> record {
    let socket = (engine-socket)
    let server = ($server | upsert infra (infra-of $server $ctx))
    let name = (container-name $server)
    let mark = (mark-of $ctx)
    mut info = (inspect $socket $name)
    if $info == null {
        let image = (image-for $socket $server $ctx)
        let net = (ensure-network $socket $server.infra $mark)
        let labels = {
            "provisioning.infra": $server.infra
            "provisioning.server": $server.hostname
            "provisioning.provider": "local"
        }
        let spec = {
            Image: $image
            Hostname: $server.hostname
            Cmd: ["sleep" "infinity"]
            Labels: (if $mark == null { $labels } else { $labels | insert "provisioning.created-by" $mark })
            # An init as PID 1 reaps the daemons the taskservs start and stop.
            HostConfig: {NetworkMode: $net, Init: true}
            NetworkingConfig: {EndpointsConfig: {$net: {Aliases: [$server.hostname]}}}
        }
        let r = (request $socket POST $"/containers/create?name=(seg $name)" $spec)
        # Another step may have created it meanwhile: then it exists now.
        if $r.status != 201 and (inspect $socket $name) == null {
            error make {msg: $"container engine: creating container ($name) from ($image) answered ($r.status): (message-of $r)"}
        }
        $info = (inspect $socket $name)
    }
    if not $info.State.Running {
        call $socket POST $"/containers/(seg $name)/start" --ok [204 304] | ignore
    }
    wait-ready $socket $name
    describe-server $server (inspect $socket $name)
}

# Delete the server's container (with its anonymous volumes), and the infra's network once
# no container is left on it. A missing container or network is not an error. In a
# workflow, only what the calling step created is deleted (its mark, see the header): a
# container found already there, or created by another workflow or step, is kept, and so
# is a network another workflow created. Returns {hostname, deleted, reason}.
export def delete-server [server: record, ctx: record]: nothing -> record {
    let socket = (engine-socket)
    let server = ($server | upsert infra (infra-of $server $ctx))
    let name = (container-name $server)
    let mark = (mark-of $ctx)
    let info = (inspect $socket $name)
    let owner = ($info | get -o Config.Labels | default {} | get -o "provisioning.created-by")
    if $info != null and $mark != null and $owner != $mark {
        let by = if $owner == null { "found already there" } else { $"created by workflow step ($owner)" }
        return {hostname: $server.hostname, deleted: false, reason: $"kept: ($by), not by this step \(($mark)\)"}
    }
    if $info != null {
        call $socket DELETE $"/containers/(seg $name)?force=true&v=true" --ok [200 204 404] | ignore
    }
    delete-network-if-unused $socket $server.infra $mark
    {hostname: $server.hostname, deleted: ($info != null), reason: (if $info == null { "missing" } else { "deleted" })}
}

# Deletes the infra's network when no container is left on it and, in a workflow, when
# this workflow created it.
def delete-network-if-unused [socket: string, infra: string, mark: any] {
    let net = (network-name $infra)
    let filters = ({network: [$net]} | to json -r)
    let left = (call $socket GET $"/containers/json?({all: true, filters: $filters} | url build-query)")
    if not ($left | is-empty) { return }
    let r = (request $socket GET $"/networks/(seg $net)")
    if $r.status != 200 { return }
    let owner = ($r.body | decode utf-8 | from json | get -o Labels | default {} | get -o "provisioning.created-by-workflow")
    if $mark == null or $owner == (workflow-of $mark) {
        call $socket DELETE $"/networks/(seg $net)" --ok [200 204 404] | ignore
    }
}

# Run `sh -c command` on the server and return its standard output. A non-zero exit is an
# error whose message has the exit code and the output (stdout and stderr).
export def server-exec [server: record, command: string]: nothing -> string {
    let socket = (engine-socket)
    let name = (container-name $server)
    let r = (exec-in $socket $name $command)
    if $r.exit_code != 0 {
        let output = ([$r.stdout $r.stderr] | str trim | where {|s| $s != "" } | str join "\n")
        error make {msg: $"command on ($server.hostname) exited with code ($r.exit_code): (summary $command)\n($output)"}
    }
    $r.stdout
}

# Whether the server's container exists and its state: {hostname, exists, state}
# (state is the engine's: running, exited, created, ...; `missing` when it does not exist).
export def server-status [server: record]: nothing -> record {
    let socket = (engine-socket)
    let info = (inspect $socket (container-name $server))
    {
        hostname: $server.hostname
        exists: ($info != null)
        state: (if $info == null { "missing" } else { $info.State.Status })
    }
}

# The containers this provider created (label provisioning.provider=local), of one infra
# or of all: {infra, hostname, name, id, state, image}.
export def list-servers [infra?: string]: nothing -> table {
    let socket = (engine-socket)
    let labels = (
        ["provisioning.provider=local"]
        | append (if $infra != null { [$"provisioning.infra=($infra)"] } else { [] })
    )
    let filters = ({label: $labels} | to json -r)
    call $socket GET $"/containers/json?({all: true, filters: $filters} | url build-query)"
    | each {|c|
        {
            infra: ($c.Labels | get -o "provisioning.infra")
            hostname: ($c.Labels | get -o "provisioning.server")
            name: ($c.Names | first | str trim --left --char "/")
            id: $c.Id
            state: $c.State
            image: $c.Image
        }
    }
    | default []
}
