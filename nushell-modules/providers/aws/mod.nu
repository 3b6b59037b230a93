# AWS provider: EC2 instances through the `aws` CLI (v2 or v1: the distribution's `awscli`
# package), commands over SSH.
#
# The four commands of the provider contract (docs/extensions.md). Settings, in order of
# precedence: the server's own entry, [provider_settings.aws] of the infra (from `ctx`, or
# from $env.ORCH_PARAMS for the commands that get no `ctx`), the environment, then the
# [config] defaults of manifest.toml. Credentials: aws_access_key_id, aws_secret_access_key
# and (temporary credentials) aws_session_token of the settings, else the environment's
# AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (in a workflow, the
# daemon keeps the settings' secrets out of its records: the step reads them at run time).
# They reach the CLI only through the environment of each call, never its command line;
# the CLI signs the requests (Signature Version 4) and reads no profile or config file.
#
# Instances are found by their Name tag (= the server's hostname) among those pending,
# running, stopping or stopped. An instance create-server runs in a workflow is tagged
# provisioning-created-by=<workflow>/<step> in the RunInstances request itself; in a
# workflow (`ctx.workflow` set), delete-server terminates only an instance carrying the
# calling step's tag: a compensation never terminates an instance it found already there.
#
# Tested against moto's EC2 emulator in server mode (tests/tests/cloud_providers/aws.rs),
# because AWS cannot be reached from the test machines (see docs/providers.md).

use ../shared *

const MANIFEST = path self manifest.toml
const LIVE_STATES = [pending running stopping stopped]
# The tag marking what a workflow step created.
const CREATED_BY = "provisioning-created-by"

# Runs an instance tagged Name=<hostname> unless one exists, and waits until it is running
# (and, with wait_for_ssh, until SSH answers).
export def create-server [server: record, ctx: record]: nothing -> record {
    let cfg = aws-config $server $ctx
    let found = find-instance $cfg $server.hostname
    let instance = if $found == null {
        (ec2-call $cfg run-instances (run-params $cfg $server (mark-of $ctx))).Instances | first
    } else { $found }
    let instance = ensure-running $cfg $instance
    let result = {
        hostname: $server.hostname
        provider: "aws"
        id: $instance.InstanceId
        address: (instance-address $instance)
        state: $instance.State.Name
    }
    if $cfg.wait_for_ssh {
        if $result.address == null {
            error make {msg: $"EC2 instance ($result.id) \(($server.hostname)) has no IP address to reach over SSH"}
        }
        wait-ssh ($cfg | insert address $result.address) $"EC2 instance ($server.hostname) \(($result.address)) is running"
    }
    $result
}

# Terminates the instance tagged Name=<hostname> and waits until it is terminated; nothing
# to do when there is none. In a workflow, only an instance the calling step created (its
# tag) is terminated; another is kept. Returns {hostname, deleted, reason}.
export def delete-server [server: record, ctx: record]: nothing -> record {
    let cfg = aws-config $server $ctx
    let found = find-instance $cfg $server.hostname
    if $found == null { return {hostname: $server.hostname, deleted: false, reason: "missing"} }
    let owner = $found | get -o Tags | default [] | where {|t| ($t.Key? | default "") == $CREATED_BY } | get -o 0.Value
    let kept = kept-reason $found.InstanceId $owner (mark-of $ctx)
    if $kept != null { return {hostname: $server.hostname, deleted: false, reason: $kept} }
    ec2-call $cfg terminate-instances {InstanceIds: [$found.InstanceId]} | ignore
    wait-instance $cfg $found.InstanceId [terminated] | ignore
    {hostname: $server.hostname, deleted: true, reason: $"terminated ($found.InstanceId)"}
}

# Runs `sh -c command` on the instance over SSH (public address, else private), with sudo
# when the SSH user is not root.
#
# NOT TESTED against a real instance: the test machines cannot reach AWS. The tests run
# this with a fake `ssh` on PATH that records its arguments and runs the command locally,
# which checks the command line built here, not a real SSH session.
export def server-exec [server: record, command: string]: nothing -> string {
    let cfg = aws-config $server
    let address = if ($server.address? | is-not-empty) {
        $server.address
    } else {
        let found = find-instance $cfg $server.hostname
        if $found == null {
            error make {msg: $"EC2 instance ($server.hostname) does not exist \(no instance tagged Name=($server.hostname))"}
        }
        let ip = instance-address $found
        if $ip == null {
            error make {msg: $"EC2 instance ($found.InstanceId) \(($server.hostname)) has no IP address"}
        }
        $ip
    }
    ssh-exec ($cfg | insert address $address) $server.hostname aws $command
}

# {hostname, exists, state}: state is EC2's (pending, running, stopping, stopped) or
# "missing" (none, or only terminated ones).
export def server-status [server: record]: nothing -> record {
    let cfg = aws-config $server
    let found = find-instance $cfg $server.hostname
    if $found == null {
        {hostname: $server.hostname, exists: false, state: "missing"}
    } else {
        {hostname: $server.hostname, exists: true, state: $found.State.Name}
    }
}

# --- configuration ---------------------------------------------------------------------

def aws-config [server: record, ctx?: record]: nothing -> record {
    let pick = settings-picker aws $MANIFEST $server $ctx
    let duration = {|key, fallback| to-duration (do $pick $key null | default $fallback) $key "AWS provider" }
    {
        region: (do $pick region ($env.AWS_REGION? | default $env.AWS_DEFAULT_REGION?))
        # none: the CLI's own endpoint for the region (https://ec2.<region>.amazonaws.com)
        endpoint: (do $pick endpoint $env.AWS_EC2_ENDPOINT?)
        access_key: (do $pick aws_access_key_id $env.AWS_ACCESS_KEY_ID? | default "")
        secret_key: (do $pick aws_secret_access_key $env.AWS_SECRET_ACCESS_KEY? | default "")
        session_token: (do $pick aws_session_token $env.AWS_SESSION_TOKEN? | default "")
        image: (do $pick image null)
        instance_type: (do $pick instance_type null | default "t3.micro")
        key_name: (do $pick key_name null)
        subnet_id: (do $pick subnet_id null)
        security_group_ids: (do $pick security_group_ids null | as-string-list)
        disk_size: (do $pick disk_size null)
        root_device: (do $pick root_device null | default "/dev/xvda")
        volume_type: (do $pick volume_type null | default "gp3")
        user_data: (do $pick user_data null)
        user: (do $pick user null | default "ec2-user")
        ssh_key: (do $pick ssh_key null)
        ssh_port: (do $pick ssh_port null | default 22)
        timeout: (do $duration timeout "10m")
        poll_interval: (do $duration poll_interval "5s")
        http_timeout: (do $duration http_timeout "30s")
        wait_for_ssh: (do $pick wait_for_ssh null | default true)
        ssh_timeout: (do $duration ssh_timeout "5m")
    }
}

# RunInstances input: one instance tagged Name=<hostname> (and provisioning-infra, and the
# step's mark).
def run-params [cfg: record, server: record, mark: any]: nothing -> record {
    if ($cfg.image | is-empty) {
        error make {msg: $"AWS provider: no AMI for ($server.hostname): set `image` \(an AMI id of region ($cfg.region)) in [provider_settings.aws] or in the server's entry"}
    }
    let tags = [[Key Value]; [Name $server.hostname] [managed-by provisioning] [provisioning-infra ($server.infra? | default "")] [$CREATED_BY ($mark | default "")]]
        | where Value != ""
    mut params = {
        ImageId: $cfg.image
        InstanceType: $cfg.instance_type
        MinCount: 1
        MaxCount: 1
        TagSpecifications: [{ResourceType: "instance", Tags: $tags}]
    }
    if ($cfg.key_name | is-not-empty) { $params = $params | insert KeyName $cfg.key_name }
    if ($cfg.subnet_id | is-not-empty) { $params = $params | insert SubnetId $cfg.subnet_id }
    if ($cfg.security_group_ids | is-not-empty) { $params = $params | insert SecurityGroupIds $cfg.security_group_ids }
    if ($cfg.disk_size | is-not-empty) {
        $params = $params | insert BlockDeviceMappings [{
            DeviceName: $cfg.root_device
            Ebs: {VolumeSize: ($cfg.disk_size | into int), VolumeType: $cfg.volume_type, DeleteOnTermination: true}
        }]
    }
    # The CLI base64-encodes UserData itself.
    if ($cfg.user_data | is-not-empty) { $params = $params | insert UserData $cfg.user_data }
    $params
}

# --- EC2 through the aws CLI -----------------------------------------------------------

# One `aws ec2 <command>` with `input` (its parameters as the API names them, e.g.
# {InstanceIds: [...]}): {ok, code, message, data (the answer)}. The input goes in a
# private temporary file (--cli-input-json), so no value is read as an option or shows on
# the command line; the credentials go in the call's environment only.
def ec2-request [cfg: record, command: string, input: record]: nothing -> record {
    if ($cfg.access_key | is-empty) or ($cfg.secret_key | is-empty) {
        error make {msg: "AWS credentials missing: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment (and AWS_SESSION_TOKEN for temporary credentials), or aws_access_key_id and aws_secret_access_key in [provider_settings.aws]"}
    }
    if ($cfg.region | is-empty) {
        error make {msg: "AWS region missing: set `region` in [provider_settings.aws] or in the server's entry, or AWS_REGION in the environment"}
    }
    if (which aws | is-empty) {
        error make {msg: "the aws CLI is not installed (Debian: apt-get install awscli): the aws provider calls EC2 through it"}
    }
    let seconds = [1 ($cfg.http_timeout / 1sec | math ceil)] | math max | into string
    mut args = [--region $cfg.region --output json --cli-connect-timeout $seconds --cli-read-timeout $seconds]
    if ($cfg.endpoint | is-not-empty) { $args = $args ++ [--endpoint-url $cfg.endpoint] }
    let input_file = mktemp --tmpdir aws-input.XXXXXXXX
    $input | to json --raw | save --force $input_file
    let args = $args ++ [ec2 $command --cli-input-json $"file://($input_file)"]
    let out = do {
        # Only this call's environment: the settings' credentials, no profile or config
        # file of the user, no pager, no instance metadata lookups.
        # An inherited endpoint variable must not send the signed request elsewhere: the
        # endpoint is the settings' (--endpoint-url) or AWS's own.
        hide-env --ignore-errors AWS_PROFILE AWS_DEFAULT_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL AWS_ENDPOINT_URL_EC2
        let token = if ($cfg.session_token | is-empty) { {} } else { {AWS_SESSION_TOKEN: $cfg.session_token} }
        load-env ({
            AWS_ACCESS_KEY_ID: $cfg.access_key
            AWS_SECRET_ACCESS_KEY: $cfg.secret_key
            AWS_CONFIG_FILE: "/dev/null"
            AWS_SHARED_CREDENTIALS_FILE: "/dev/null"
            AWS_PAGER: ""
            AWS_EC2_METADATA_DISABLED: "true"
            # The CLI's own retries stay few, so one call takes at most a few http_timeouts.
            AWS_MAX_ATTEMPTS: "3"
            AWS_RETRY_MODE: "standard"
        } | merge $token)
        ^aws ...$args | complete
    }
    rm --force $input_file
    if $out.exit_code == 0 {
        return {ok: true, code: null, message: null, data: (if ($out.stdout | str trim | is-empty) { {} } else { $out.stdout | from json })}
    }
    # "An error occurred (Code) when calling the Action operation[ (reached max retries: N)]: message"
    let parsed = $out.stderr | parse --regex 'An error occurred \((?<code>[^)]*)\) when calling the \w+ operation[^:]*: (?<message>[\s\S]*)'
    if ($parsed | is-empty) {
        {ok: false, code: "Unknown", message: ($out.stderr | str trim), data: null}
    } else {
        {ok: false, code: $parsed.0.code, message: ($parsed.0.message | str trim), data: null}
    }
}

# A request whose error becomes an error naming the EC2 action; returns the answer.
def ec2-call [cfg: record, command: string, input: record]: nothing -> record {
    let resp = ec2-request $cfg $command $input
    if not $resp.ok { ec2-error $command $resp }
    $resp.data
}

# `EC2 DescribeInstances failed: <code>: <message>`.
def ec2-error [command: string, resp: record] {
    let action = $command | split row "-" | each {|w| $w | str capitalize } | str join
    error make {msg: $"EC2 ($action) failed: ($resp.code): ($resp.message)"}
}

# The live instance tagged Name=<hostname>, or null (terminated ones are ignored).
def find-instance [cfg: record, hostname: string]: nothing -> any {
    let filters = [{Name: "tag:Name", Values: [$hostname]} {Name: "instance-state-name", Values: $LIVE_STATES}]
    let instances = ec2-call $cfg describe-instances {Filters: $filters} | reservation-instances
    match ($instances | length) {
        0 => null
        1 => ($instances | first)
        _ => {
            error make {msg: $"EC2: ($instances | length) instances are tagged Name=($hostname) \(($instances | get InstanceId | str join ', ')): terminate the extra ones or rename them"}
        }
    }
}

# The instances of a DescribeInstances answer.
def reservation-instances []: record -> list {
    $in | get -o Reservations | default [] | each {|r| $r | get -o Instances | default [] } | flatten
}

# Polls DescribeInstances until the instance's state is one of `states` (bounded by
# cfg.timeout). A new instance can be unknown to DescribeInstances for a moment
# (InvalidInstanceID.NotFound, EC2's eventual consistency): that is waited out too.
def wait-instance [cfg: record, id: string, states: list<string>] {
    poll-until $cfg.timeout $cfg.poll_interval {||
        let resp = ec2-request $cfg describe-instances {InstanceIds: [$id]}
        let instance = if $resp.ok {
            $resp.data | reservation-instances | where InstanceId == $id | get -o 0
        } else if $resp.code == "InvalidInstanceID.NotFound" {
            null
        } else {
            ec2-error describe-instances $resp
        }
        let state = $instance | get -o State.Name
        {done: ($state in $states), value: $instance, state: $state}
    } {|last|
        $"EC2 instance ($id) did not reach state ($states | str join ' or ') within ($cfg.timeout) \(state: ($last.state | default 'not visible yet'))"
    }
}

# Waits out pending/stopping and starts a stopped instance: commands must be able to run.
def ensure-running [cfg: record, instance: record]: nothing -> record {
    let id = $instance.InstanceId
    let instance = match $instance.State.Name {
        "running" => $instance
        "pending" => (wait-instance $cfg $id [running stopped terminated])
        "stopping" => (wait-instance $cfg $id [stopped])
        _ => $instance
    }
    match $instance.State.Name {
        "running" => $instance
        "stopped" => {
            ec2-call $cfg start-instances {InstanceIds: [$id]} | ignore
            wait-instance $cfg $id [running]
        }
        $state => { error make {msg: $"EC2 instance ($id) is ($state)"} }
    }
}

def instance-address [instance: record]: nothing -> any {
    let public = $instance | get -o PublicIpAddress | default ""
    let private = $instance | get -o PrivateIpAddress | default ""
    if $public != "" { $public } else if $private != "" { $private } else { null }
}
