//! Nushell tasks run by the real `nu`, with structured parameters and progress events;
//! logs, followed logs and the event stream.

use orch_e2e::Daemon;

#[test]
fn a_nu_snippet_gets_structured_params_and_reports_progress() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let task = nu.json(
        r#"orch submit --params {servers: [web-01 web-02], size: 2} --nu '
            $params.servers | enumerate | each {|s|
                {progress: (($s.index + 1) * 50), message: $"created ($s.item)"} | to json -r | print
            } | ignore
            print $"total ($params.size)"
        ' | orch wait | first | select status progress"#,
    );
    assert_eq!(
        task,
        serde_json::json!({"status": "succeeded", "progress": 100.0})
    );
    let detail = nu.json("orch task 1 | select progress_message params");
    assert_eq!(
        detail,
        serde_json::json!({"progress_message": "created web-02", "params": {"servers": ["web-01", "web-02"], "size": 2}})
    );
    let progress =
        nu.json("orch watch --task 1 | where event == progress | get details.progress.percent");
    // Progress is coalesced per commit: the first value may be folded into the last.
    assert!(
        progress == serde_json::json!([50.0, 100.0]) || progress == serde_json::json!([100.0]),
        "{progress}"
    );
    let log = nu.run("orch logs 1");
    assert!(log.ends_with("total 2\n"), "{log}");
}

#[test]
fn a_nu_script_file_reads_params_from_the_environment() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let script = daemon.dir().join("install.nu");
    std::fs::write(
        &script,
        "def main [] { let p = ($env.ORCH_PARAMS | from json); print $\"installing ($p.taskserv) on ($p.server)\"; if $p.taskserv == broken { exit 7 } }\n",
    )
    .unwrap();
    let tasks = nu.json(&format!(
        "[{{script: '{s}', params: {{taskserv: postgres, server: db-01}}}}, {{script: '{s}', params: {{taskserv: broken, server: db-02}}}}] \
         | orch submit | orch wait | select status exit_code",
        s = script.display()
    ));
    assert_eq!(
        tasks,
        serde_json::json!([{"status": "succeeded", "exit_code": 0}, {"status": "failed", "exit_code": 7}])
    );
    assert_eq!(nu.run("orch logs 1"), "installing postgres on db-01\n");
    // Several tasks' logs as a table, from the arguments or the pipeline.
    let both = serde_json::json!([
        {"id": 1, "log": "installing postgres on db-01\n"},
        {"id": 2, "log": "installing broken on db-02\n"},
    ]);
    assert_eq!(nu.json("orch logs 1 2"), both);
    assert_eq!(nu.json("orch tasks | sort-by id | orch logs"), both);
    assert_eq!(
        nu.json("orch tasks --status failed | orch logs | get id"),
        serde_json::json!([2])
    );
    let refused = nu.try_run("orch logs 1 2 --follow").unwrap_err();
    assert!(refused.contains("--follow follows one task"), "{refused}");
}

#[test]
fn follow_streams_a_running_tasks_output_until_it_ends() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let lines = nu.json(
        "orch submit [sh -c 'for i in 1 2 3 4 5; do echo line $i; sleep 0.1; done'] | ignore; \
         orch logs 1 --follow | lines",
    );
    assert_eq!(
        lines,
        serde_json::json!(["line 1", "line 2", "line 3", "line 4", "line 5"])
    );
}

#[test]
fn watch_streams_live_events_in_order() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    // Tasks are submitted from a background job while the watch runs; `--since 0` makes
    // the result independent of how fast the watch subscribes, and `first 4` ends the
    // stream after: submitted, started, succeeded (task 1), submitted (task 2).
    let events = nu.json(
        "let job = (job spawn { sleep 300ms; orch submit echo one | orch wait | ignore; orch submit --after 1 echo two | ignore }); \
         orch watch --since 0 | first 4 | select task event",
    );
    let got: Vec<(u64, String)> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["task"].as_u64().unwrap(),
                e["event"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (1, "submitted".to_string()),
            (1, "started".to_string()),
            (1, "succeeded".to_string()),
            (2, "submitted".to_string()),
        ]
    );
}

#[test]
fn listing_filters_by_status_and_label() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    nu.run("[{command: [true], label: a}, {command: [false], label: b}, {command: [true], label: b}] | orch submit | orch wait | ignore");
    assert_eq!(
        nu.json("orch tasks --label b | get id"),
        serde_json::json!([3, 2])
    );
    assert_eq!(
        nu.json("orch tasks --status failed | get id"),
        serde_json::json!([2])
    );
    assert_eq!(
        nu.json("orch tasks --limit 1 | get id"),
        serde_json::json!([3])
    );
    assert_eq!(
        nu.json("orch health | get tasks.succeeded"),
        serde_json::json!(2)
    );
    let err = nu.try_run("orch tasks --status finished").unwrap_err();
    assert!(err.contains("`finished` is not a status"), "{err}");
}

#[test]
fn stdout_and_stderr_share_the_log_and_silent_tasks_leave_none() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    nu.run("[{command: [sh -c 'echo out; sleep 0.05; echo err >&2']}, {command: [true]}] | orch submit | orch wait | ignore");
    assert_eq!(nu.run("orch logs 1"), "out\nerr\n");
    assert_eq!(nu.run("orch logs 2"), "");
    assert!(daemon.data_dir().join("logs/1.log").exists());
    assert!(!daemon.data_dir().join("logs/2.log").exists());
}

#[test]
fn submit_takes_a_record_and_ignores_the_item_each_hands_it() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let one = nu.json(
        "{command: [echo hi], label: rec, priority: 3} | orch submit | select id label priority",
    );
    assert_eq!(
        one,
        serde_json::json!({"id": 1, "label": "rec", "priority": 3})
    );
    let ids = nu.json("1..3 | each { orch submit --label loop true } | get id");
    assert_eq!(ids, serde_json::json!([2, 3, 4]));
    let err = nu
        .try_run("{command: [echo hi], colour: red} | orch submit")
        .unwrap_err();
    assert!(err.contains("`colour` is not a task setting"), "{err}");
}

#[test]
fn clean_removes_finished_tasks_but_keeps_what_kept_tasks_need() {
    let mut daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    // 1 succeeds; 2 fails; 3 waits on a gate and depends on 1; 4 prints and succeeds.
    let gate = daemon.dir().join("gate");
    nu.run(&format!(
        "orch submit true | ignore; orch submit false | ignore; \
         orch submit --after 1 [sh -c 'while [ ! -f {} ]; do sleep 0.01; done'] | ignore; \
         orch submit echo hello | ignore; orch wait 1 2 4 | ignore",
        gate.display()
    ));
    assert!(daemon.data_dir().join("logs/4.log").exists());
    let err = nu.try_run("orch clean --status running").unwrap_err();
    assert!(err.contains("`running` is not a final state"), "{err}");
    assert_eq!(nu.json("orch clean --older-than 1hr | get removed"), 0);
    let removed = nu.json("orch clean");
    // Task 1 stays: task 3, still waiting, depends on it.
    assert_eq!(
        removed,
        serde_json::json!({"removed": 2, "ids": [2, 4], "workflows": []})
    );
    assert!(!daemon.data_dir().join("logs/4.log").exists());
    assert_eq!(nu.json("orch tasks | get id"), serde_json::json!([3, 1]));
    assert_eq!(nu.json("orch health | get tasks.failed"), 0);
    std::fs::write(&gate, "").unwrap();
    nu.run("orch wait 3 | ignore");
    assert_eq!(nu.json("orch clean | get ids"), serde_json::json!([1, 3]));
    // The removal is durable, and recorded.
    daemon.kill9();
    daemon.restart();
    assert_eq!(nu.json("orch tasks | length"), 0);
    assert_eq!(nu.json("orch health | get tasks.succeeded"), 0);
    assert_eq!(
        nu.json("orch audit --action clean | get outcome"),
        serde_json::json!([
            "removed 2 tasks",
            "removed 2 tasks",
            "removed 0 tasks",
            "only finished tasks can be removed, and `running` is not a final state"
        ])
    );
    let err = nu.try_run("orch submit --after 1 true").unwrap_err();
    assert!(
        err.contains("depends on task 1, which does not exist"),
        "{err}"
    );
}

#[test]
fn submit_with_wait_returns_the_tasks_once_they_are_final() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let one = nu.json("orch submit --wait [sh -c 'sleep 0.2; exit 3'] | select status exit_code");
    assert_eq!(one, serde_json::json!({"status": "failed", "exit_code": 3}));
    let many = nu.json(
        "[{command: [true]} {command: [sh -c 'sleep 0.2']}] | orch submit --wait | get status",
    );
    assert_eq!(many, serde_json::json!(["succeeded", "succeeded"]));
    let queued = nu.json("orch submit [sleep 5] | get status");
    assert_ne!(
        queued, "succeeded",
        "without --wait the answer comes at once"
    );
}

#[test]
fn two_things_to_run_or_a_missing_script_are_refused_at_submit() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    for (script, names) in [
        (
            "orch submit --nu 'print x' echo hi",
            ["a command here", "--nu here"],
        ),
        (
            "orch submit --nu 'print x' --script x.nu",
            ["--nu here", "--script here"],
        ),
        (
            "{command: [echo hi], nu: 'print x'} | orch submit",
            ["`command` here", "`nu` here"],
        ),
    ] {
        let err = nu.try_run(script).unwrap_err();
        assert!(err.contains("two things to run"), "{script}: {err}");
        for name in names {
            assert!(err.contains(name), "{script}: {err}");
        }
    }
    let err = nu.try_run("orch submit --script missing.nu").unwrap_err();
    assert!(
        err.contains("script not found") && err.contains("missing.nu: no such file"),
        "{err}"
    );
    let err = nu.try_run("orch submit --script .").unwrap_err();
    assert!(err.contains("it is not a file"), "{err}");
    assert_eq!(nu.json("orch tasks | length"), 0, "nothing was submitted");
    // A record's command still replaces the flags' default (one thing per source).
    let task = nu.json("{command: [true]} | orch submit --nu 'exit 1' --wait");
    assert_eq!(task["status"], "succeeded", "{task}");
}

#[test]
fn commands_by_id_take_several_ids_or_the_pipeline() {
    let daemon = Daemon::start(&["--parallel", "1"]);
    let nu = daemon.nu();
    nu.run("orch submit --label gate [sleep 1000] | ignore");
    nu.run("1..4 | each { orch submit --label q true } | ignore");
    // One id: a record, as before; several: a list, each task once.
    assert_eq!(nu.json("orch task 2 | get id"), 2);
    let rows = nu.json("orch cancel 2 3 3 | get id");
    assert_eq!(rows, serde_json::json!([2, 3]));
    // From the pipeline: rows of `orch tasks`.
    let cancelled =
        nu.json("orch tasks --label q --status queued | orch cancel | get status | uniq");
    assert_eq!(cancelled, serde_json::json!(["cancelled"]));
    let retried = nu.json("orch tasks --label q | orch retry | get id | sort");
    assert_eq!(retried, serde_json::json!([2, 3, 4, 5]));
    nu.run("orch cancel 1 | ignore");
    let waited = nu.json("orch wait 2 2 3 | get id");
    assert_eq!(
        waited,
        serde_json::json!([2, 3]),
        "orch wait gives each task once"
    );
    // The first failure stops the run, naming what was done before it.
    let late = nu.json("orch submit [sleep 1000] | get id");
    let err = nu.try_run(&format!("orch cancel {late} 999")).unwrap_err();
    assert!(err.contains("999"), "{err}");
    assert!(
        err.contains(&format!("the tasks before it ({late}) were done")),
        "{err}"
    );
    assert_eq!(
        nu.json(&format!("orch task {late} | get status")),
        "cancelled"
    );
    let err = nu.try_run("orch cancel").unwrap_err();
    assert!(err.contains("no task id"), "{err}");
    // Inside `each`, the argument wins over the item piped in.
    let one = nu.json("[5] | each {|id| orch task $id | get id }");
    assert_eq!(one, serde_json::json!([5]));
}

/// Regression: a dependant released in the same engine turn as the commit notice of its
/// own submission was let go of while its stored record still said `blocked`, then read
/// back as blocked and dropped from the queue (found timing chains of three tasks).
#[test]
fn chains_submitted_one_task_at_a_time_all_run() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let rounds = nu.json(
        "1..100 | each {|i|
            let a = (orch submit true)
            let b = (orch submit --after $a.id true)
            let c = (orch submit --after $b.id true)
            orch wait $c.id --timeout 10sec | get 0.status
        } | uniq",
    );
    assert_eq!(rounds, serde_json::json!(["succeeded"]));
}
