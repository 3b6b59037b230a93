# The `provisioning` command tree: provisioning work driven through the orchestrator.
#
# Needs the orchestrator plugin registered in nu (scripts/install.sh does it):
#   use nushell-modules/provisioning
#   provisioning orchestrator start
#   provisioning task run ./install-postgres.nu --params {server: db-01} --wait

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
    let task = (orch submit --script $script --params $params --retries $retries --label $label --timeout $timeout)
    if not $wait { return $task }
    let done = (orch wait $task.id | first)
    $done | insert output (orch logs $done.id)
}
