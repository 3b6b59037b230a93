# The `local` provider: servers are containers on the local Docker or Podman engine.
#
# It drives the engine with its command-line client: `docker` when it is on PATH, else
# `podman` (`$env.PROVISIONING_LOCAL_CLI` chooses one). The engine is the client's:
# `$env.DOCKER_HOST` when set (docker reads it, podman is given it as `--url`), else the
# client's own default (docker: its current context; podman: the local engine). The
# daemon sets DOCKER_HOST for the steps and scripts it runs, so they use the engine it
# uses. Every call is bounded by `timeout`, so nothing here waits forever.
#
# A server `web-01` of the infra `shop` is the container `shop-web-01` (unless the server
# record names its `container`, as the daemon's test environments do), with hostname
# `web-01`, on the network `shop-net` where `web-01` is also its DNS alias: the servers of
# one infra reach each other by hostname. Containers and networks carry the labels
# `provisioning.infra`, `provisioning.server` and `provisioning.provider=local`. Every
# name is checked before it reaches a command line: hostnames are RFC 1123 labels, infras
# and containers engine names (letters, digits, `_`, `.`, `-`, not first), so no name
# can be read as an option or reach another object.
#
# What a workflow step creates carries its mark, `provisioning.created-by=<workflow>/<step>`,
# set in the create request itself (so a crash cannot leave it unmarked); a container found
# already there is used as it is and keeps its mark. In a workflow (`ctx.workflow` set),
# delete-server removes only a container carrying the mark of the calling step: a
# compensation undoes what its own step created, never what it found.
#
# The image: the server's `image`, else `provider_settings.local.image` of the infra's
# settings, else `$env.PROVISIONING_BASE_IMAGE`, else `[config] image` of manifest.toml
# (the default the daemon's test environments use too).

use ../shared [step-context mark-of kept-reason]

const MANIFEST = path self manifest.toml
# Seconds a plain engine call may take.
const CALL_TIMEOUT = 60
# Seconds a command run by `server-exec` may take (override: PROVISIONING_LOCAL_EXEC_TIMEOUT).
const EXEC_TIMEOUT = 900
# The exit code of `timeout` when the time ran out.
const TIMED_OUT = 124

# ---------------------------------------------------------------------------------------
# The engine's client

# The client's command line: `docker`, or `podman` (with `--url` for DOCKER_HOST).
def client []: nothing -> list<string> {
    let chosen = ($env.PROVISIONING_LOCAL_CLI? | default "")
    let name = if $chosen != "" {
        if $chosen not-in [docker podman] {
            error make {msg: $"PROVISIONING_LOCAL_CLI=($chosen): the local provider drives `docker` or `podman`"}
        }
        $chosen
    } else if (which docker | is-not-empty) {
        "docker"
    } else if (which podman | is-not-empty) {
        "podman"
    } else {
        error make {msg: "neither `docker` nor `podman` is on PATH: the local provider needs one of them (scripts/ensure-podman.sh installs podman)"}
    }
    let host = ($env.DOCKER_HOST? | default "")
    if $name == "podman" and $host != "" { [podman --url $host] } else { [$name] }
}

# Runs the client with `args`: {exit_code, stdout, stderr}; the client is stopped after
# `timeout` seconds (exit code 124).
def engine [args: list<string>, --timeout: int = $CALL_TIMEOUT]: nothing -> record {
    let cli = (client)
    # --foreground keeps `timeout` and the client in the caller's process group, so that a
    # cancel or a timeout of the step (which signals the whole group) stops them too.
    ^timeout --foreground --kill-after=5 $"($timeout)s" ...$cli ...$args | complete
}

# Runs the client with `args` and returns its standard output; a failure is an error
# with the client's message.
def call [args: list<string>]: nothing -> string {
    let r = (engine $args)
    if $r.exit_code != 0 {
        error make {msg: $"container engine: `(client | first) ($args | first 2 | str join ' ')` failed: (message-of $r)"}
    }
    $r.stdout
}

# The client's message of a failed call.
def message-of [r: record]: nothing -> string {
    if $r.exit_code == $TIMED_OUT {
        return $"no answer within ($CALL_TIMEOUT) s \(DOCKER_HOST=($env.DOCKER_HOST? | default 'unset'))"
    }
    $r.stderr | str trim
}

# Whether a failed call says its container, image or network does not exist (as docker
# and podman say it; not a socket that is missing).
def missing [r: record]: nothing -> bool {
    let text = ($r.stderr | str lowercase)
    let says = ["no such container" "no such image" "image not known" "no such network" "network not found"]
    $r.exit_code != 0 and ($says | any {|m| $text | str contains $m })
}

# ---------------------------------------------------------------------------------------
# Names

# `value` when it is an engine name (what containers and networks may be called:
# letters, digits, `_`, `.` and `-`, starting with a letter or digit, at most 128), else
# an error naming `what`.
def engine-name [what: string, value: any]: nothing -> string {
    if ($value | describe) != "string" or not ($value =~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$') {
        error make {msg: $"($what) `($value)` is not a valid name \(letters, digits, `_`, `.` or `-`, starting with a letter or digit, at most 128\)"}
    }
    $value
}

# The server's hostname, an RFC 1123 label (1 to 63 letters, digits or `-`, not starting
# or ending with `-`).
def hostname-of [server: record]: nothing -> string {
    let host = ($server.hostname? | default "")
    if ($host | describe) != "string" or not ($host =~ '^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$') {
        error make {msg: $"hostname `($host)` is not an RFC 1123 label \(1 to 63 letters, digits or `-`, not starting or ending with `-`\)"}
    }
    $host
}

# The infra a server belongs to: the server record's `infra`, else the step context's
# (`ctx`, or $env.ORCH_PARAMS / ORCH_PARAMS_FILE for the commands that get no ctx).
def infra-of [server: record, ctx?: record]: nothing -> string {
    let ctx = (step-context $ctx)
    let infra = ($server.infra? | default ($ctx.infra?.name?))
    if ($infra | is-empty) {
        error make {msg: $"server ($server.hostname? | default '?'): no `infra` in the server record or the step context"}
    }
    engine-name infra $infra
}

# The server's container: the record's `container` (named by the daemon), else
# `<infra>-<hostname>`.
def container-of [server: record, ctx?: record]: nothing -> string {
    let host = (hostname-of $server)
    if ($server.container? | is-not-empty) {
        return (engine-name container $server.container)
    }
    engine-name container $"(infra-of $server $ctx)-($host)"
}

def network-name [infra: string]: nothing -> string { $"($infra)-net" }

# The workflow part of a mark (the network is shared by a workflow's steps).
def workflow-of [mark: any]: nothing -> any {
    if $mark == null { null } else { $mark | split row "/" | first }
}

# `--label key=value` for each label.
def label-args [labels: record]: nothing -> list<string> {
    $labels | items {|key, value| [--label $"($key)=($value)"] } | flatten
}

# ---------------------------------------------------------------------------------------
# Inspection

# The container's inspect record, or null when it does not exist.
def inspect [name: string]: nothing -> any {
    let r = (engine [inspect --type container $name])
    if $r.exit_code == 0 { return ($r.stdout | from json | first) }
    if (missing $r) { return null }
    error make {msg: $"container engine: inspecting ($name) failed: (message-of $r)"}
}

# The record create-server returns, from an inspect record.
def describe-server [server: record, network: string, info: record]: nothing -> record {
    {
        hostname: $server.hostname
        provider: "local"
        id: $info.Id
        address: ($info.NetworkSettings?.Networks? | get -o $network | get -o IPAddress | default "")
        state: $info.State.Status
    }
}

# The image for a server (see the header), checked to exist locally.
def image-for [server: record, ctx: record]: nothing -> string {
    let image = (
        $server.image?
        | default ($ctx.infra?.settings?.provider_settings?.local?.image?)
        | default ($env.PROVISIONING_BASE_IMAGE?)
        | default (open $MANIFEST | get config.image)
    )
    if not ($image =~ '^[A-Za-z0-9][A-Za-z0-9_./:@-]*$') {
        error make {msg: $"image `($image)` is not an image reference"}
    }
    let r = (engine [image inspect $image])
    if (missing $r) {
        error make {msg: $"image ($image) does not exist in the local container engine \(no registry is used\): build it with scripts/build-base-image.sh \(PROVISIONING_BASE_IMAGE=($image) for another name\)"}
    }
    if $r.exit_code != 0 {
        error make {msg: $"container engine: inspecting image ($image) failed: (message-of $r)"}
    }
    $image
}

# Creates the infra's network unless it exists (another step may create it concurrently),
# marked with the creating workflow (`provisioning.created-by-workflow`).
def ensure-network [infra: string, mark: any]: nothing -> string {
    let net = (network-name $infra)
    if (engine [network inspect $net]).exit_code == 0 { return $net }
    let labels = {"provisioning.infra": $infra, "provisioning.provider": "local"}
    let labels = if $mark == null { $labels } else { $labels | insert "provisioning.created-by-workflow" (workflow-of $mark) }
    let r = (engine [network create ...(label-args $labels) $net])
    # Another step may have created it meanwhile: then it exists now.
    if $r.exit_code != 0 and (engine [network inspect $net]).exit_code != 0 {
        error make {msg: $"container engine: creating network ($net) failed: (message-of $r)"}
    }
    $net
}

# ---------------------------------------------------------------------------------------
# Exec

# Runs `sh -c command` in a running container: {exit_code, stdout, stderr}. A failure of
# the engine (no such container, not running, no answer in time) is an error.
def exec-in [name: string, command: string, --timeout: int]: nothing -> record {
    let timeout = ($timeout | default ($env.PROVISIONING_LOCAL_EXEC_TIMEOUT? | default $EXEC_TIMEOUT | into int))
    let started = (date now)
    let r = (engine [exec $name sh -c $command] --timeout $timeout)
    if $r.exit_code == 0 { return $r }
    if $r.exit_code == $TIMED_OUT and ((date now) - $started) >= ($timeout * 1sec) {
        error make {msg: $"command in ($name) did not end within ($timeout) s: (summary $command)"}
    }
    # The command's own failure, unless the container is missing or stopped.
    let state = (inspect $name | get -o State)
    if $state == null {
        error make {msg: $"server container ($name) does not exist \(create-server first\)"}
    }
    if not $state.Running {
        error make {msg: $"server container ($name) is not running \(state ($state.Status)\): (message-of $r)"}
    }
    $r
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
def wait-ready [name: string] {
    for _ in 1..60 {
        let ok = (try { (exec-in $name "true" --timeout 10).exit_code == 0 } catch { false })
        if $ok { return }
        let state = (inspect $name | get -o State)
        if $state == null or not $state.Running {
            error make {msg: $"container ($name) is not running \(state ($state.Status? | default missing), exit code ($state.ExitCode? | default '-')\): see `(client | first) logs ($name)`"}
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
    let server = ($server | upsert infra (infra-of $server $ctx))
    let name = (container-of $server)
    let net = (network-name $server.infra)
    let mark = (mark-of $ctx)
    if (inspect $name) == null {
        let image = (image-for $server $ctx)
        ensure-network $server.infra $mark | ignore
        let labels = {
            "provisioning.infra": $server.infra
            "provisioning.server": $server.hostname
            "provisioning.provider": "local"
        }
        let labels = if $mark == null { $labels } else { $labels | insert "provisioning.created-by" $mark }
        # An init as PID 1 reaps the daemons the taskservs start and stop.
        let r = (engine [create --name $name --hostname $server.hostname --network $net --network-alias $server.hostname --init ...(label-args $labels) $image sleep infinity])
        # Another step may have created it meanwhile: then it exists now.
        if $r.exit_code != 0 and (inspect $name) == null {
            error make {msg: $"container engine: creating container ($name) from ($image) failed: (message-of $r)"}
        }
    }
    if not (inspect $name).State.Running {
        call [start $name] | ignore
    }
    wait-ready $name
    describe-server $server $net (inspect $name)
}

# Delete the server's container (with its anonymous volumes), and the infra's network once
# no container is left on it. A missing container or network is not an error. In a
# workflow, only what the calling step created is deleted (its mark, see the header): a
# container found already there, or created by another workflow or step, is kept, and so
# is a network another workflow created. Returns {hostname, deleted, reason}.
export def delete-server [server: record, ctx: record]: nothing -> record {
    let server = ($server | upsert infra (infra-of $server $ctx))
    let name = (container-of $server)
    let mark = (mark-of $ctx)
    let info = (inspect $name)
    let owner = ($info | get -o Config.Labels | default {} | get -o "provisioning.created-by")
    let kept = if $info == null { null } else { kept-reason $name $owner $mark }
    if $kept != null { return {hostname: $server.hostname, deleted: false, reason: $kept} }
    if $info != null {
        let r = (engine [rm --force --volumes $name])
        if $r.exit_code != 0 and not (missing $r) {
            error make {msg: $"container engine: removing ($name) failed: (message-of $r)"}
        }
    }
    delete-network-if-unused $server.infra $mark
    {hostname: $server.hostname, deleted: ($info != null), reason: (if $info == null { "missing" } else { "deleted" })}
}

# Deletes the infra's network when no container is left on it and, in a workflow, when
# this workflow created it.
def delete-network-if-unused [infra: string, mark: any] {
    let net = (network-name $infra)
    let left = (call [ps --all --quiet --filter $"network=($net)"] | str trim)
    if $left != "" { return }
    let r = (engine [network inspect --format "{{json .Labels}}" $net])
    if $r.exit_code != 0 { return }
    let owner = ($r.stdout | from json | default {} | get -o "provisioning.created-by-workflow")
    if $mark == null or $owner == (workflow-of $mark) {
        let r = (engine [network rm $net])
        if $r.exit_code != 0 and not (missing $r) {
            error make {msg: $"container engine: removing network ($net) failed: (message-of $r)"}
        }
    }
}

# Run `sh -c command` on the server and return its standard output. A non-zero exit is an
# error whose message has the exit code and the output (stdout and stderr).
export def server-exec [server: record, command: string]: nothing -> string {
    let r = (exec-in (container-of $server) $command)
    if $r.exit_code != 0 {
        let output = ([$r.stdout $r.stderr] | str trim | where {|s| $s != "" } | str join "\n")
        error make {msg: $"command on ($server.hostname) exited with code ($r.exit_code): (summary $command)\n($output)"}
    }
    $r.stdout
}

# Whether the server's container exists and its state: {hostname, exists, state}
# (state is the engine's: running, exited, created, ...; `missing` when it does not exist).
export def server-status [server: record]: nothing -> record {
    let info = (inspect (container-of $server))
    {
        hostname: $server.hostname
        exists: ($info != null)
        state: (if $info == null { "missing" } else { $info.State.Status })
    }
}

# The containers this provider created (label provisioning.provider=local), of one infra
# or of all: {infra, hostname, name, id, state, image}.
export def list-servers [infra?: string]: nothing -> table {
    let filters = (
        [provisioning.provider=local]
        | append (if $infra != null { [$"provisioning.infra=(engine-name infra $infra)"] } else { [] })
        | each {|label| [--filter $"label=($label)"] }
        | flatten
    )
    let ids = (call [ps --all --quiet ...$filters] | lines | str trim | where {|id| $id != "" })
    if ($ids | is-empty) { return [] }
    call [inspect --type container ...$ids]
    | from json
    | each {|c|
        {
            infra: ($c.Config.Labels | get -o "provisioning.infra")
            hostname: ($c.Config.Labels | get -o "provisioning.server")
            name: ($c.Name | str trim --left --char "/")
            id: $c.Id
            state: $c.State.Status
            image: $c.Config.Image
        }
    }
}
