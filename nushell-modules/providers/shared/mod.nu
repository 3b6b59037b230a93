# Code the cloud providers (aws, upcloud) share: the step context and settings lookup,
# durations, the mark of what a workflow step created, polling, and commands over SSH.
#
# Not an extension (no manifest.toml): a provider module imports it with
# `use ../shared *`, which Nushell resolves from the provider's own file, so it is found
# whatever the working directory of the step (the daemon `use`s providers by absolute
# path). Nothing here is exported by the providers themselves: their contract stays the
# four commands of docs/extensions.md.

# The step context: `ctx` when given, else $env.ORCH_PARAMS or the file
# $env.ORCH_PARAMS_FILE (set by the daemon for every step) when it holds a record, else
# an empty record.
export def step-context [ctx?: record]: nothing -> record {
    if $ctx != null { return $ctx }
    let params = $env.ORCH_PARAMS? | default (if ($env.ORCH_PARAMS_FILE? | is-not-empty) { open --raw $env.ORCH_PARAMS_FILE } else { "" })
    if ($params | str trim | is-empty) { return {} }
    # A task without parameters has `null` there; anything but a record is no context.
    let value = try { $params | from json } catch { null }
    if ($value | describe | str starts-with "record") { $value } else { {} }
}

# A closure `{|key, env_value| ...}` giving a provider setting by precedence: the server's
# own entry, then [provider_settings.<provider>] of the step context, then `env_value`
# (the environment's value, or null), then the [config] defaults of `manifest`.
export def settings-picker [provider: string, manifest: string, server: record, ctx?: record]: nothing -> closure {
    let defaults = try { open $manifest | get -o config | default {} } catch { {} }
    let settings = (step-context $ctx) | get -o infra.settings.provider_settings | default {} | get -o $provider | default {}
    {|key, env_value|
        $server | get -o $key | default ($settings | get -o $key) | default $env_value | default ($defaults | get -o $key)
    }
}

# An int (seconds), a duration, or a string such as "90s", "5m", "1h", "500ms", "5min";
# `label` names the provider in the error ("AWS provider").
export def to-duration [value: any, key: string, label: string]: nothing -> duration {
    match ($value | describe) {
        "duration" => $value
        "int" | "float" => ($value * 1sec)
        "string" => {
            let m = $value | parse --regex '^\s*(?<n>\d+(?:\.\d+)?)\s*(?<u>ms|s|sec|m|min|h|hr)\s*$'
            if ($m | is-empty) {
                error make {msg: $"($label): `($key)` = `($value)` is not a duration \(examples: 30s, 5m, 1h)"}
            }
            let unit = {ms: 1ms, s: 1sec, sec: 1sec, m: 1min, min: 1min, h: 1hr, hr: 1hr} | get $m.0.u
            ($m.0.n | into float) * $unit
        }
        _ => { error make {msg: $"($label): `($key)` = `($value)` is not a duration"} }
    }
}

# A value that may be one string or a list of them, as a list.
export def as-string-list []: any -> list {
    let value = $in | default []
    if ($value | describe) == "string" { [$value] } else { $value }
}

# The mark of what the step of `ctx` creates (`<workflow>/<step>`), or null outside a
# workflow.
export def mark-of [ctx: record]: nothing -> any {
    if $ctx.workflow? == null { null } else { $"($ctx.workflow)/($ctx.step? | default '')" }
}

# Why a compensation keeps the server `id` whose mark is `owner` (null: none), or null when
# it may delete it: outside a workflow (`mark` null) or when the calling step created it.
export def kept-reason [id: string, owner: any, mark: any]: nothing -> any {
    if $mark == null or $owner == $mark { return null }
    let by = if $owner == null { "found already there" } else { $"created by workflow step ($owner)" }
    $"kept ($id): ($by), not by this step \(($mark)\)"
}

# Calls `attempt` every `interval` until the record it returns has `done: true`, and
# returns that record's `value`; past `timeout`, fails with the message `timed_out` makes
# of the last record.
export def poll-until [timeout: duration, interval: duration, attempt: closure, timed_out: closure]: nothing -> any {
    let deadline = (date now) + $timeout
    loop {
        let result = do $attempt
        if $result.done { return $result.value? }
        if (date now) > $deadline { error make {msg: (do $timed_out $result)} }
        sleep $interval
    }
}

# --- SSH -------------------------------------------------------------------------------
# `cfg` holds: user, address, ssh_port, ssh_key (optional), ssh_timeout, poll_interval.
# Not tested against a real server: the test machines reach none. The tests run these
# with a fake `ssh` on PATH that records its arguments and runs the command locally, which
# checks the command line built here, not a real SSH session.

# `ssh`'s arguments up to the destination, which comes after `--`.
def ssh-args [cfg: record]: nothing -> list<string> {
    if (which ssh | is-empty) {
        error make {msg: "the ssh client is not installed (openssh-client): the provider runs commands on its servers over SSH"}
    }
    mut args = [
        -o BatchMode=yes -o StrictHostKeyChecking=accept-new -o ConnectTimeout=10 -o LogLevel=ERROR
        -p ($cfg.ssh_port | into string)
    ]
    if ($cfg.ssh_key | is-not-empty) { $args = $args ++ [-i ($cfg.ssh_key | path expand)] }
    # `--` ends ssh's options: the destination can never be read as one.
    $args ++ ["--" (ssh-destination $cfg)]
}

# `user@address`, both checked: a user name (letters, digits, `_`, `.`, `-`, not starting
# with `-`) and an address (IPv4, IPv6 or a hostname), so no value becomes an ssh option.
def ssh-destination [cfg: record]: nothing -> string {
    let user = ($cfg.user | into string)
    let address = ($cfg.address | into string)
    if not ($user =~ '^[A-Za-z_][A-Za-z0-9_.-]{0,31}$') {
        error make {msg: $"ssh: the user `($user)` is not a valid user name \(letters, digits, `_`, `.` or `-`, not starting with `-` or a digit)"}
    }
    if not ($address =~ '^[A-Za-z0-9:]([A-Za-z0-9.:-]{0,252}[A-Za-z0-9:])?$') {
        error make {msg: $"ssh: the address `($address)` is not an IP address or a hostname"}
    }
    $"($user)@($address)"
}

# `s` as one single-quoted sh word.
def sh-quote [s: string]: nothing -> string {
    $"'($s | str replace --all "'" "'\\''")'"
}

# Runs `sh -c command` over SSH, with `sudo -n` when the user is not root; returns stdout.
# A non-zero exit is an error naming the server (hostname, provider, address), the exit
# code and the output.
export def ssh-exec [cfg: record, hostname: string, provider: string, command: string]: nothing -> string {
    let remote = if $cfg.user == "root" {
        $"sh -c (sh-quote $command)"
    } else {
        $"sudo -n sh -c (sh-quote $command)"
    }
    let out = ^ssh ...(ssh-args $cfg) $remote | complete
    if $out.exit_code != 0 {
        error make {msg: $"command failed on ($hostname) \(($provider), ($cfg.address)) with exit code ($out.exit_code): ($out.stdout)($out.stderr)"}
    }
    $out.stdout
}

# Waits until `ssh ... true` succeeds (bounded by cfg.ssh_timeout); `what` names the
# server in the error ("EC2 instance web-01 (1.2.3.4) is running").
export def wait-ssh [cfg: record, what: string] {
    let args = ssh-args $cfg
    poll-until $cfg.ssh_timeout $cfg.poll_interval {||
        let out = ^ssh ...$args true | complete
        {done: ($out.exit_code == 0), stderr: $out.stderr}
    } {|last| $"($what) but SSH did not answer within ($cfg.ssh_timeout): ($last.stderr | str trim)" } | ignore
}
