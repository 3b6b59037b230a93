# AWS provider: EC2 instances through the EC2 Query API (version 2016-11-15), requests
# signed with Signature Version 4 (implemented below with `hash sha256` and `bits xor`),
# commands over SSH.
#
# The four commands of the provider contract (docs/extensions.md). Settings, in order of
# precedence: the server's own entry, [provider_settings.aws] of the infra (from `ctx`, or
# from $env.ORCH_PARAMS for the commands that get no `ctx`), the environment, then the
# [config] defaults of manifest.toml. Credentials: aws_access_key_id, aws_secret_access_key
# and (temporary credentials) aws_session_token of the settings, else the environment's
# AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (in a workflow, the
# daemon keeps the settings' secrets out of its records: the step reads them at run time).
#
# Instances are found by their Name tag (= the server's hostname) among those pending,
# running, stopping or stopped. An instance create-server runs in a workflow is tagged
# provisioning-created-by=<workflow>/<step> in the RunInstances request itself; in a
# workflow (`ctx.workflow` set), delete-server terminates only an instance carrying the
# calling step's tag: a compensation never terminates an instance it found already there.
#
# Tested against tests/standins/cloud_standin.py, a local stand-in that recomputes every
# signature, because AWS cannot be reached from the test machines (see docs/providers.md).

const MANIFEST = path self manifest.toml
const EC2_VERSION = "2016-11-15"
const LIVE_STATES = [pending running stopping stopped]
# The tag marking what a workflow step created.
const CREATED_BY = "provisioning-created-by"

# The mark of what the step of `ctx` creates (`<workflow>/<step>`), or null outside a
# workflow.
def mark-of [ctx: record]: nothing -> any {
    if $ctx.workflow? == null { null } else { $"($ctx.workflow)/($ctx.step? | default '')" }
}

# Runs an instance tagged Name=<hostname> unless one exists, and waits until it is running
# (and, with wait_for_ssh, until SSH answers).
export def create-server [server: record, ctx: record]: nothing -> record {
    let cfg = aws-config $server $ctx
    let found = find-instance $cfg $server.hostname
    let instance = if $found == null {
        let resp = ec2-call $cfg RunInstances (run-params $cfg $server (mark-of $ctx))
        $resp.instancesSet | as-list | first
    } else { $found }
    let instance = ensure-running $cfg $instance
    let result = {
        hostname: $server.hostname
        provider: "aws"
        id: $instance.instanceId
        address: (instance-address $instance)
        state: $instance.instanceState.name
    }
    if $cfg.wait_for_ssh {
        if $result.address == null {
            error make {msg: $"EC2 instance ($result.id) \(($server.hostname)) has no IP address to reach over SSH"}
        }
        wait-ssh ($cfg | insert address $result.address) $server.hostname
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
    let mark = mark-of $ctx
    let owner = $found | get -o tagSet | as-list | where {|t| ($t.key? | default "") == $CREATED_BY } | get -o 0.value
    if $mark != null and $owner != $mark {
        let by = if $owner == null { "found already there" } else { $"created by workflow step ($owner)" }
        return {hostname: $server.hostname, deleted: false, reason: $"kept ($found.instanceId): ($by), not by this step \(($mark)\)"}
    }
    ec2-call $cfg TerminateInstances {"InstanceId.1": $found.instanceId} | ignore
    wait-instance $cfg $found.instanceId [terminated] | ignore
    {hostname: $server.hostname, deleted: true, reason: $"terminated ($found.instanceId)"}
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
            error make {msg: $"EC2 instance ($found.instanceId) \(($server.hostname)) has no IP address"}
        }
        $ip
    }
    ssh-exec ($cfg | insert address $address) $server.hostname $command
}

# {hostname, exists, state}: state is EC2's (pending, running, stopping, stopped) or
# "missing" (none, or only terminated ones).
export def server-status [server: record]: nothing -> record {
    let cfg = aws-config $server
    let found = find-instance $cfg $server.hostname
    if $found == null {
        {hostname: $server.hostname, exists: false, state: "missing"}
    } else {
        {hostname: $server.hostname, exists: true, state: $found.instanceState.name}
    }
}

# --- configuration ---------------------------------------------------------------------

# The step context: `ctx` when given, else $env.ORCH_PARAMS or the file $env.ORCH_PARAMS_FILE (set by the daemon for every
# step), else nothing.
def step-context [ctx?: record]: nothing -> record {
    if $ctx != null { return $ctx }
    let params = $env.ORCH_PARAMS? | default (if ($env.ORCH_PARAMS_FILE? | is-not-empty) { open --raw $env.ORCH_PARAMS_FILE } else { "" })
    if ($params | str trim | is-empty) { return {} }
    try { $params | from json } catch { {} }
}

def aws-config [server: record, ctx?: record]: nothing -> record {
    let defaults = try { open $MANIFEST | get -o config | default {} } catch { {} }
    let settings = (step-context $ctx) | get -o infra.settings.provider_settings.aws | default {}
    # server entry > provider settings > environment > manifest defaults
    let pick = {|key, env_value|
        $server | get -o $key | default ($settings | get -o $key) | default $env_value | default ($defaults | get -o $key)
    }
    let region = do $pick region ($env.AWS_REGION? | default $env.AWS_DEFAULT_REGION?)
    let endpoint = do $pick endpoint $env.AWS_EC2_ENDPOINT?
    let endpoint = if ($endpoint | is-not-empty) {
        $endpoint
    } else if ($region | is-not-empty) {
        $"https://ec2.($region).amazonaws.com/"
    } else { null }
    {
        region: $region
        endpoint: $endpoint
        access_key: (do $pick aws_access_key_id $env.AWS_ACCESS_KEY_ID? | default "")
        secret_key: (do $pick aws_secret_access_key $env.AWS_SECRET_ACCESS_KEY? | default "")
        session_token: (do $pick aws_session_token $env.AWS_SESSION_TOKEN? | default "")
        image: (do $pick image null)
        instance_type: (do $pick instance_type null | default "t3.micro")
        key_name: (do $pick key_name null)
        subnet_id: (do $pick subnet_id null)
        security_group_ids: (do $pick security_group_ids null | default [] | if ($in | describe) == "string" { [$in] } else { $in })
        disk_size: (do $pick disk_size null)
        root_device: (do $pick root_device null | default "/dev/xvda")
        volume_type: (do $pick volume_type null | default "gp3")
        user_data: (do $pick user_data null)
        user: (do $pick user null | default "ec2-user")
        ssh_key: (do $pick ssh_key null)
        ssh_port: (do $pick ssh_port null | default 22)
        timeout: (to-duration (do $pick timeout null | default "10m") timeout)
        poll_interval: (to-duration (do $pick poll_interval null | default "5s") poll_interval)
        http_timeout: (to-duration (do $pick http_timeout null | default "30s") http_timeout)
        wait_for_ssh: (do $pick wait_for_ssh null | default true)
        ssh_timeout: (to-duration (do $pick ssh_timeout null | default "5m") ssh_timeout)
    }
}

# An int (seconds), a duration, or a string such as "90s", "5m", "1h", "500ms", "5min".
def to-duration [value: any, key: string]: nothing -> duration {
    match ($value | describe) {
        "duration" => $value
        "int" | "float" => ($value * 1sec)
        "string" => {
            let m = $value | parse --regex '^\s*(?<n>\d+(?:\.\d+)?)\s*(?<u>ms|s|sec|m|min|h|hr)\s*$'
            if ($m | is-empty) {
                error make {msg: $"AWS provider: `($key)` = `($value)` is not a duration \(examples: 30s, 5m, 1h)"}
            }
            let unit = {ms: 1ms, s: 1sec, sec: 1sec, m: 1min, min: 1min, h: 1hr, hr: 1hr} | get $m.0.u
            ($m.0.n | into float) * $unit
        }
        _ => { error make {msg: $"AWS provider: `($key)` = `($value)` is not a duration"} }
    }
}

# RunInstances parameters: one instance tagged Name=<hostname> (and provisioning-infra).
def run-params [cfg: record, server: record, mark: any]: nothing -> record {
    if ($cfg.image | is-empty) {
        error make {msg: $"AWS provider: no AMI for ($server.hostname): set `image` \(an AMI id of region ($cfg.region)) in [provider_settings.aws] or in the server's entry"}
    }
    let tags = [[key value]; [Name $server.hostname] [managed-by provisioning] [provisioning-infra ($server.infra? | default "")] [$CREATED_BY ($mark | default "")]]
        | where value != ""
    mut params = {
        ImageId: $cfg.image
        InstanceType: $cfg.instance_type
        MinCount: 1
        MaxCount: 1
        "TagSpecification.1.ResourceType": "instance"
    }
    for tag in ($tags | enumerate) {
        $params = $params | insert $"TagSpecification.1.Tag.($tag.index + 1).Key" $tag.item.key
        $params = $params | insert $"TagSpecification.1.Tag.($tag.index + 1).Value" $tag.item.value
    }
    if ($cfg.key_name | is-not-empty) { $params = $params | insert KeyName $cfg.key_name }
    if ($cfg.subnet_id | is-not-empty) { $params = $params | insert SubnetId $cfg.subnet_id }
    for group in ($cfg.security_group_ids | enumerate) {
        $params = $params | insert $"SecurityGroupId.($group.index + 1)" $group.item
    }
    if ($cfg.disk_size | is-not-empty) {
        $params = $params | merge {
            "BlockDeviceMapping.1.DeviceName": $cfg.root_device
            "BlockDeviceMapping.1.Ebs.VolumeSize": ($cfg.disk_size | into int)
            "BlockDeviceMapping.1.Ebs.VolumeType": $cfg.volume_type
            "BlockDeviceMapping.1.Ebs.DeleteOnTermination": "true"
        }
    }
    if ($cfg.user_data | is-not-empty) {
        $params = $params | insert UserData ($cfg.user_data | encode base64)
    }
    $params
}

# --- EC2 Query API ---------------------------------------------------------------------

# One signed request: {ok, status, code, message, data (the answer as nested records)}.
# Transport failures (refused, timeout) are errors.
def ec2-request [cfg: record, action: string, params: record]: nothing -> record {
    if ($cfg.access_key | is-empty) or ($cfg.secret_key | is-empty) {
        error make {msg: "AWS credentials missing: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment (and AWS_SESSION_TOKEN for temporary credentials), or aws_access_key_id and aws_secret_access_key in [provider_settings.aws]"}
    }
    if ($cfg.region | is-empty) {
        error make {msg: "AWS region missing: set `region` in [provider_settings.aws] or in the server's entry, or AWS_REGION in the environment"}
    }
    let body = {Action: $action, Version: $EC2_VERSION} | merge $params
        | items {|key, value| $"(uri-encode $key)=(uri-encode ($value | into string))" }
        | str join "&"
    let content_type = "application/x-www-form-urlencoded; charset=utf-8"
    let amz_date = date now | date to-timezone UTC | format date "%Y%m%dT%H%M%SZ"
    mut headers = {content-type: $content_type, host: (url-host $cfg.endpoint), x-amz-date: $amz_date}
    if ($cfg.session_token | is-not-empty) {
        $headers = $headers | insert x-amz-security-token $cfg.session_token
    }
    let authorization = sigv4-authorization {
        method: "POST"
        path: (url-path $cfg.endpoint)
        query: ($cfg.endpoint | url parse | get query)
        headers: $headers
        payload: ($body | into binary)
        region: $cfg.region
        service: "ec2"
        access_key: $cfg.access_key
        secret_key: $cfg.secret_key
        amz_date: $amz_date
    }
    # `http` writes the Host header itself (the same value as signed).
    let send = $headers | reject host | insert authorization $authorization
    let resp = try {
        http post --full --allow-errors --raw --max-time $cfg.http_timeout --headers $send $cfg.endpoint $body
    } catch {|e|
        error make {msg: $"EC2 ($action): no answer from ($cfg.endpoint): ($e.msg)"}
    }
    let text = $resp.body | if ($in | describe) == "binary" { decode utf-8 } else { $in | default "" }
    let doc = try { $text | from xml | xml-simplify } catch { null }
    if $resp.status >= 400 {
        let error = $doc | get -o Errors.Error | default ($doc | get -o Error)
        let error = if ($error | describe | str starts-with "list") { $error | first } else { $error }
        {
            ok: false
            status: $resp.status
            code: ($error | get -o Code | default "Unknown")
            message: ($error | get -o Message | default ($text | str substring 0..300))
            data: null
        }
    } else if $doc == null {
        error make {msg: $"EC2 ($action): HTTP ($resp.status) with an answer that is not XML: ($text | str substring 0..300)"}
    } else {
        {ok: true, status: $resp.status, code: null, message: null, data: $doc}
    }
}

# A request whose error becomes an error; returns the answer's content.
def ec2-call [cfg: record, action: string, params: record]: nothing -> record {
    let resp = ec2-request $cfg $action $params
    if not $resp.ok {
        error make {msg: $"EC2 ($action) failed: HTTP ($resp.status) ($resp.code): ($resp.message)"}
    }
    $resp.data
}

# The live instance tagged Name=<hostname>, or null (terminated ones are ignored).
def find-instance [cfg: record, hostname: string]: nothing -> any {
    mut params = {"Filter.1.Name": "tag:Name", "Filter.1.Value.1": $hostname, "Filter.2.Name": "instance-state-name"}
    for state in ($LIVE_STATES | enumerate) {
        $params = $params | insert $"Filter.2.Value.($state.index + 1)" $state.item
    }
    let instances = ec2-call $cfg DescribeInstances $params | reservation-instances
    match ($instances | length) {
        0 => null
        1 => ($instances | first)
        _ => {
            error make {msg: $"EC2: ($instances | length) instances are tagged Name=($hostname) \(($instances | get instanceId | str join ', ')): terminate the extra ones or rename them"}
        }
    }
}

# The instances of a DescribeInstances answer.
def reservation-instances []: record -> list {
    $in | get -o reservationSet | as-list | each {|r| $r | get -o instancesSet | as-list } | flatten
}

# Polls DescribeInstances until the instance's state is one of `states` (bounded by
# cfg.timeout). A new instance can be unknown to DescribeInstances for a moment
# (InvalidInstanceID.NotFound): that is waited out too.
def wait-instance [cfg: record, id: string, states: list<string>] {
    let deadline = (date now) + $cfg.timeout
    loop {
        let resp = ec2-request $cfg DescribeInstances {"InstanceId.1": $id}
        let instance = if $resp.ok {
            $resp.data | reservation-instances | where instanceId == $id | get -o 0
        } else if $resp.code == "InvalidInstanceID.NotFound" {
            null
        } else {
            error make {msg: $"EC2 DescribeInstances failed: HTTP ($resp.status) ($resp.code): ($resp.message)"}
        }
        let state = $instance | get -o instanceState.name
        if $state in $states { return $instance }
        if (date now) > $deadline {
            error make {msg: $"EC2 instance ($id) did not reach state ($states | str join ' or ') within ($cfg.timeout) \(state: ($state | default 'not visible yet'))"}
        }
        sleep $cfg.poll_interval
    }
}

# Waits out pending/stopping and starts a stopped instance: commands must be able to run.
def ensure-running [cfg: record, instance: record]: nothing -> record {
    let id = $instance.instanceId
    let instance = match $instance.instanceState.name {
        "running" => $instance
        "pending" => (wait-instance $cfg $id [running stopped terminated])
        "stopping" => (wait-instance $cfg $id [stopped])
        _ => $instance
    }
    match $instance.instanceState.name {
        "running" => $instance
        "stopped" => {
            ec2-call $cfg StartInstances {"InstanceId.1": $id} | ignore
            wait-instance $cfg $id [running]
        }
        $state => { error make {msg: $"EC2 instance ($id) is ($state)"} }
    }
}

def instance-address [instance: record]: nothing -> any {
    let public = $instance | get -o ipAddress | default ""
    let private = $instance | get -o privateIpAddress | default ""
    if $public != "" { $public } else if $private != "" { $private } else { null }
}

# --- XML -------------------------------------------------------------------------------

# `from xml` output as plain values: an element of text is its text, an element whose
# children are all <item> is a list, any other element a record of its children (an
# empty element is ""; read lists through `as-list`).
def xml-simplify []: record -> any {
    let node = $in
    let elements = $node.content | where {|c| $c.tag != null }
    if ($elements | is-empty) {
        $node.content | where {|c| $c.tag == null } | get -o content | str join
    } else if ($elements | all {|e| $e.tag == "item" }) {
        $elements | each {|e| $e | xml-simplify }
    } else {
        $elements | reduce --fold {} {|e, acc| $acc | upsert $e.tag ($e | xml-simplify) }
    }
}

def as-list []: any -> list {
    let value = $in
    if ($value | describe | str starts-with "list") or ($value | describe | str starts-with "table") { $value } else { [] }
}

# --- Signature Version 4 ---------------------------------------------------------------

# RFC 3986 encoding as SigV4 wants it: everything but A-Z a-z 0-9 - _ . ~ as %XX (UTF-8).
def uri-encode [s: string]: nothing -> string {
    $s | url encode --all
        | str replace --all "%2D" "-" | str replace --all "%5F" "_"
        | str replace --all "%2E" "." | str replace --all "%7E" "~"
}

def url-host [url: string]: nothing -> string {
    let u = $url | url parse
    let default_port = if $u.scheme == "https" { "443" } else { "80" }
    if ($u.port | is-empty) or ($u.port == $default_port) { $u.host } else { $"($u.host):($u.port)" }
}

def url-path [url: string]: nothing -> string {
    let path = $url | url parse | get path
    if ($path | is-empty) { "/" } else { $path }
}

def hmac-sha256 [key: binary, message: binary]: nothing -> binary {
    let key = if ($key | bytes length) > 64 { $key | hash sha256 --binary } else { $key }
    let zeros = 64 - ($key | bytes length)
    let block = if $zeros > 0 {
        $key | bytes add --end (1..$zeros | each { 0x[00] } | bytes collect)
    } else { $key }
    let ipad = 1..64 | each { 0x[36] } | bytes collect
    let opad = 1..64 | each { 0x[5c] } | bytes collect
    let inner = $block | bits xor $ipad | bytes add --end $message | hash sha256 --binary
    $block | bits xor $opad | bytes add --end $inner | hash sha256 --binary
}

# The Authorization header of Signature Version 4 (header-based signing).
# `r`: {method, path, query (raw, "" for none), headers (record: lowercase name -> value,
# all of them signed), payload (binary), region, service, access_key, secret_key, amz_date}.
def sigv4-authorization [r: record]: nothing -> string {
    let canonical_uri = $r.path | split row "/" | each {|s| uri-encode ($s | url decode) } | str join "/"
    let canonical_query = if ($r.query | is-empty) { "" } else {
        $r.query | split row "&" | where {|p| $p != "" }
            | each {|p|
                let kv = $p | split row -n 2 "="
                {k: (uri-encode ($kv.0 | url decode)), v: (uri-encode ($kv | get -o 1 | default "" | url decode))}
            }
            | sort-by k v | each {|p| $"($p.k)=($p.v)" } | str join "&"
    }
    let headers = $r.headers | transpose name value
        | each {|h| {name: ($h.name | str lowercase), value: ($h.value | into string | str trim | str replace --all --regex '\s+' ' ')} }
        | sort-by name
    let canonical_headers = $headers | each {|h| $"($h.name):($h.value)\n" } | str join
    let signed_headers = $headers | get name | str join ";"
    let canonical_request = [
        $r.method $canonical_uri $canonical_query $canonical_headers $signed_headers ($r.payload | hash sha256)
    ] | str join "\n"
    let date = $r.amz_date | str substring 0..7
    let scope = $"($date)/($r.region)/($r.service)/aws4_request"
    let string_to_sign = ["AWS4-HMAC-SHA256" $r.amz_date $scope ($canonical_request | hash sha256)] | str join "\n"
    let signing_key = [$date $r.region $r.service "aws4_request"]
        | reduce --fold ($"AWS4($r.secret_key)" | into binary) {|part, key| hmac-sha256 $key ($part | into binary) }
    let signature = hmac-sha256 $signing_key ($string_to_sign | into binary) | encode hex --lower
    $"AWS4-HMAC-SHA256 Credential=($r.access_key)/($scope), SignedHeaders=($signed_headers), Signature=($signature)"
}

# --- SSH (untested against a real instance, see server-exec) ----------------------------

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

def sh-quote [s: string]: nothing -> string {
    $"'($s | str replace --all "'" "'\\''")'"
}

# `sh -c command` over SSH, with sudo when the user is not root.
def ssh-exec [cfg: record, hostname: string, command: string]: nothing -> string {
    let remote = if $cfg.user == "root" {
        $"sh -c (sh-quote $command)"
    } else {
        $"sudo -n sh -c (sh-quote $command)"
    }
    let out = ^ssh ...(ssh-args $cfg) $remote | complete
    if $out.exit_code != 0 {
        error make {msg: $"command failed on ($hostname) \(aws, ($cfg.address)) with exit code ($out.exit_code): ($out.stdout)($out.stderr)"}
    }
    $out.stdout
}

def wait-ssh [cfg: record, hostname: string] {
    let deadline = (date now) + $cfg.ssh_timeout
    loop {
        let out = ^ssh ...(ssh-args $cfg) true | complete
        if $out.exit_code == 0 { return }
        if (date now) > $deadline {
            error make {msg: $"EC2 instance ($hostname) \(($cfg.address)) is running but SSH did not answer within ($cfg.ssh_timeout): ($out.stderr | str trim)"}
        }
        sleep $cfg.poll_interval
    }
}
