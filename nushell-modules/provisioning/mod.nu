# The `provisioning` command tree: provisioning work driven through the orchestrator.
#
# Needs the orchestrator plugin registered in nu (scripts/install.sh does it):
#   use nushell-modules/provisioning
#   provisioning orchestrator start
#   provisioning task run ./install-postgres.nu --params {server: db-01} --wait

# Runs `job`; an error it raises is raised again at `span` (an argument of the user's
# call), with its message, label and help, so that it shows where the user wrote the
# call and not inside this module.
def at-caller [span: record, job: closure] {
    try { do $job } catch {|err|
        let label = ($err.details?.labels?.0?.text? | default $err.msg)
        error make {msg: $err.msg, label: {text: $label, span: $span}, help: $err.details?.help?}
    }
}

# Completions of the arguments that name something, asked of the orchestrator.
def "nu-complete taskservs" [] {
    orch extensions taskservs | each {|t| {value: $t.name, description: $t.description} }
}

def "nu-complete clusters" [] {
    orch extensions clusters | each {|c| {value: $c.name, description: $c.description} }
}

def "nu-complete providers" [] {
    orch extensions providers | each {|p| {value: $p.name, description: $p.description} }
}

def "nu-complete topologies" [] {
    orch test topology list | each {|t| {value: $t.name, description: $t.description} }
}

def "nu-complete test envs" [] {
    orch test env list | each {|e| {value: ($e.id | into string), description: $"($e.status): ($e.kind) ($e.name)"} }
}

# The workspace's infras: the directories in infra/, and those beside it with a settings
# file (as the orchestrator looks them up).
def "nu-complete infras" [] {
    let workspace = ($env.PROVISIONING_WORKSPACE? | default $env.PWD)
    let in_infra = (try { ls -s ($workspace | path join infra) | where type == dir | get name } catch { [] })
    let beside = (ls -s $workspace | where type == dir | get name | where {|name|
        [settings.toml settings.yaml settings.yml settings.json]
        | any {|file| $workspace | path join $name $file | path exists }
    })
    $in_infra | append $beside | uniq
}

# List the provisioning commands.
export def main [] {
    scope commands | where name starts-with "provisioning " | select name description
}

# Start the orchestrator daemon unless it runs, and show its status.
export def "orchestrator start" [
    --data-dir: path  # where the daemon keeps its state (default: ~/.local/share/provisioning-orchestrator)
    --parallel: int   # how many tasks may run at once
] {
    orch daemon start --data-dir $data_dir --parallel $parallel
}

# Stop the orchestrator daemon.
export def "orchestrator stop" [] {
    orch daemon stop
}

# Whether the orchestrator runs, with its task counts.
export def "orchestrator status" [] {
    orch daemon status
}

# The versions of the plugin, its protocol and the daemon (null when none runs).
export def version [] {
    orch version
}

# Run a provisioning script (a .nu file) as an orchestrator task. Its parameters reach
# the script as JSON in $env.ORCH_PARAMS. With --wait, returns the finished task with
# its output.
export def "task run" [
    script: path            # the Nushell script to run
    --params: record = {}   # structured parameters for the script
    --retries: int = 0      # how often a failed run is retried
    --timeout: duration     # kill a run after this long
    --label: string         # a label to find the task by
    --wait                  # wait for the task and return it with its output
] {
    let label = ($label | default ($script | path parse | get stem))
    at-caller (metadata $script).span {
        let task = (orch submit --script $script --params $params --retries $retries --label $label --timeout $timeout)
        if not $wait { return $task }
        let done = (orch wait $task.id | first)
        $done | insert output (orch logs $done.id)
    }
}

# Create servers of an infra with their providers (then the taskservs its settings list
# for them). Returns the workflow, or with --check its plan.
export def "server create" [
    ...servers: string       # hostnames from the infra's settings (all when none)
    --infra (-i): string@"nu-complete infras"  # the infra (a plain name in the workspace)
    --settings: string       # the settings file, relative to the infra directory
    --check (-c)             # plan only: the waves that would run
    --wait (-w)              # return once the workflow has finished
    --rollback (-r)          # compensate completed steps when one fails
] {
    (orch workflow submit servers ...$servers --infra $infra --settings $settings
        --check=$check --wait=$wait --rollback=$rollback)
}

# Install a taskserv (its dependencies first, its add-ons after) on servers of an infra.
export def "taskserv create" [
    taskserv: string@"nu-complete taskservs"  # the taskserv (provisioning taskserv list)
    --infra (-i): string@"nu-complete infras"  # the infra
    --servers (-s): list<string>  # hostnames (all of the infra's when absent)
    --settings: string       # the settings file, relative to the infra directory
    --check (-c)             # plan only: the waves that would run
    --wait (-w)              # return once the workflow has finished
    --rollback (-r)          # compensate completed steps when one fails
] {
    at-caller (metadata $taskserv).span {
        (orch workflow submit taskserv $taskserv --infra $infra --servers $servers
            --settings $settings --check=$check --wait=$wait --rollback=$rollback)
    }
}

# The taskservs the orchestrator knows, with their dependencies and add-ons.
export def "taskserv list" [] {
    orch extensions taskservs
}

# Create a cluster from a cluster definition (provisioning cluster list).
export def "cluster create" [
    cluster: string@"nu-complete clusters"  # the cluster definition
    --infra (-i): string@"nu-complete infras"  # the infra
    --provider: string@"nu-complete providers"  # the provider of its nodes (default: the infra's)
    --check (-c)             # plan only: the waves that would run
    --wait (-w)              # return once the workflow has finished
    --rollback (-r)          # compensate completed steps when one fails
] {
    at-caller (metadata $cluster).span {
        (orch workflow submit cluster $cluster --infra $infra --provider $provider
            --check=$check --wait=$wait --rollback=$rollback)
    }
}

# The cluster definitions the orchestrator knows.
export def "cluster list" [] {
    orch extensions clusters
}

# The providers the orchestrator knows.
export def "providers list" [] {
    orch extensions providers
}

# Run a batch workflow file (TOML, NUON, JSON or Nickel).
export def "workflow run" [
    file: path               # the workflow file
    --infra (-i): string@"nu-complete infras"  # the infra its server and taskserv operations use
    --check (-c)             # plan only: the waves that would run
    --wait (-w)              # return once the workflow has finished
] {
    at-caller (metadata $file).span {
        orch workflow submit batch $file --infra $infra --check=$check --wait=$wait
    }
}

# Workflows, newest first.
export def "workflow list" [] {
    orch workflow list
}

# The base image's build script, shipped beside this module.
const BUILD_BASE_IMAGE = (path self | path dirname | path join images build-base-image.sh)

# Test a taskserv quickly: install it in a fresh container, probe it, run its test,
# delete the container. Returns the environment with its results.
export def "test quick" [
    taskserv: string@"nu-complete taskservs"  # the taskserv (provisioning taskserv list)
    --ttl: duration          # delete it after this long at the latest
] {
    at-caller (metadata $taskserv).span {
        orch test env create single $taskserv --auto-start --auto-cleanup --ttl $ttl
    }
}

# A test environment with one taskserv in one container.
export def "test env single" [
    taskserv: string@"nu-complete taskservs"  # the taskserv
    --auto-start (-s)        # install and probe it until ready
    --auto-cleanup (-c)      # also run its test, then delete the container
    --ttl: duration          # delete it after this long
    --cpus: number           # CPU limit
    --memory: filesize       # memory limit
] {
    at-caller (metadata $taskserv).span {
        (orch test env create single $taskserv --auto-start=$auto_start
            --auto-cleanup=$auto_cleanup --ttl $ttl --cpus $cpus --memory $memory)
    }
}

# A test environment simulating a server: several taskservs in one container, installed
# in dependency order.
export def "test env server" [
    name: string             # the server's name (its hostname)
    taskservs: list<string>  # its taskservs
    --auto-start (-s)        # install and probe them until ready
    --auto-cleanup (-c)      # also run their tests, then delete the container
    --ttl: duration          # delete it after this long
    --cpus: number           # CPU limit
    --memory: filesize       # memory limit
] {
    at-caller (metadata $taskservs).span {
        (orch test env create server $name $taskservs --auto-start=$auto_start
            --auto-cleanup=$auto_cleanup --ttl $ttl --cpus $cpus --memory $memory)
    }
}

# A cluster test environment from a topology piped in
# (`provisioning test topology load etcd_cluster | provisioning test env cluster etcd`).
export def "test env cluster" [
    name: string             # the cluster's name
    --auto-start (-s)        # install every node and wait until the cluster is ready (default)
    --no-start               # only create the containers and the network
    --auto-cleanup (-c)      # also run the tests, then delete everything
    --ttl: duration          # delete it after this long
]: record -> record {
    let topology = $in
    let start = ($auto_start or not $no_start)
    at-caller (metadata $name).span {
        ($topology | orch test env create cluster $name --auto-start=$start
            --auto-cleanup=$auto_cleanup --ttl $ttl)
    }
}

# Test environments, newest first.
export def "test env list" [] { orch test env list }

# One test environment.
export def "test env show" [id: int@"nu-complete test envs"] { at-caller (metadata $id).span { orch test env show $id } }

# Run an environment's tests.
export def "test env run" [id: int@"nu-complete test envs"] { at-caller (metadata $id).span { orch test env run $id } }

# An environment's logs (--follow while it is being set up or tested).
export def "test env logs" [id: int@"nu-complete test envs", --follow (-f)] {
    # Checked first, so that the log itself streams unwrapped.
    at-caller (metadata $id).span { orch test env show $id | ignore }
    orch test env logs $id --follow=$follow
}

# Delete an environment's containers and network.
export def "test env delete" [id: int@"nu-complete test envs"] { at-caller (metadata $id).span { orch test env delete $id } }

# The topology templates.
export def "test topology list" [] { orch test topology list }

# Load a topology template (pipe it into `provisioning test env cluster`).
export def "test topology load" [name: string@"nu-complete topologies"]: nothing -> record {
    at-caller (metadata $name).span { orch test topology show $name }
}

# Build the base image of test environments and local servers (Debian with postgres,
# redis, etcd, containerd) without any registry; reused when it exists. Needs root,
# debootstrap and podman (scripts/ensure-podman.sh).
export def "test image build" [] {
    ^bash $BUILD_BASE_IMAGE
}
