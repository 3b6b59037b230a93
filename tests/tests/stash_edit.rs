//! Stash, enqueue and edit through the real plugin and daemon: a stashed task waits
//! across a kill -9 until it is enqueued; an edit changes what a task runs, its label
//! (the label index follows), its priority (the queue's order follows, across a restart)
//! and its dependencies; pipelines stash and enqueue several; bad requests are refused at
//! the offending argument and change nothing.

use orch_e2e::Daemon;
use serde_json::json;

#[test]
fn a_stashed_task_waits_across_a_kill_9_and_runs_as_edited_once_enqueued() {
    let mut daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let task = nu.json("orch submit --stash --label db echo first | select id status");
    assert_eq!(task["status"], "stashed");
    let id = task["id"].clone();
    daemon.kill9();
    daemon.restart();
    assert_eq!(nu.json("orch tasks --status stashed | get id"), json!([id]));
    let edited = nu.json(&format!(
        "orch edit {id} echo edited --priority 5 --label web | select status command label priority"
    ));
    assert_eq!(
        edited,
        json!({"status": "stashed", "command": "echo edited", "label": "web", "priority": 5})
    );
    assert_eq!(nu.json("orch tasks --label db | length"), 0);
    assert_eq!(nu.json("orch tasks --label web | get id"), json!([id]));
    let enqueued = nu.json(&format!("orch enqueue {id} | get status"));
    assert!(enqueued == "queued" || enqueued == "running", "{enqueued}");
    assert_eq!(
        nu.json(&format!("orch wait {id} | get 0.status")),
        "succeeded"
    );
    assert_eq!(nu.run(&format!("orch logs {id}")), "edited\n");
    let events = nu.json(&format!("orch watch --task {id} | get event"));
    assert_eq!(
        events,
        json!(["submitted", "edited", "enqueued", "started", "succeeded"])
    );
}

#[test]
fn an_edited_priority_orders_the_queue_across_a_restart() {
    let mut daemon = Daemon::start(&["--parallel", "1"]);
    let nu = daemon.nu();
    nu.run("orch pause --wait | ignore");
    let ids = nu.json("1..3 | each {|i| {command: [echo $i]} } | orch submit | get id");
    let last = ids[2].clone();
    let edited = nu.json(&format!("orch edit {last} --priority 10 | get priority"));
    assert_eq!(edited, 10);
    daemon.kill9();
    daemon.restart();
    nu.run("orch resume | ignore");
    let list = ids.as_array().unwrap().iter().map(|v| v.to_string());
    let list = list.collect::<Vec<_>>().join(" ");
    nu.run(&format!("orch wait {list} | ignore"));
    let order = nu.json(&format!(
        "orch task {list} | sort-by attempt_history.0.started | get id"
    ));
    assert_eq!(order, json!([ids[2], ids[0], ids[1]]));
}

#[test]
fn dependencies_change_a_tasks_state_and_pipelines_stash_and_enqueue_several() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    nu.run("orch pause --wait | ignore");
    let first = nu.json("orch submit true | get id");
    let second = nu.json("orch submit true | get id");
    let blocked = nu.json(&format!(
        "orch edit {second} --after {first} | select status state.waiting_on"
    ));
    assert_eq!(
        blocked,
        json!({"status": "blocked", "state.waiting_on": [first]})
    );
    let queued = nu.json(&format!("orch edit {second} --after [] | get status"));
    assert_eq!(queued, "queued");
    let stashed = nu.json("orch tasks --status queued | orch stash | get status");
    assert_eq!(stashed, json!(["stashed", "stashed"]));
    nu.run("orch resume | ignore");
    assert_eq!(nu.json("orch tasks --status queued | length"), 0);
    let ids = nu.json("orch tasks --status stashed | orch enqueue | get id | sort");
    assert_eq!(ids, json!([first, second]));
    let done = nu.json(&format!("orch wait {first} {second} | get status"));
    assert_eq!(done, json!(["succeeded", "succeeded"]));
}

#[test]
fn bad_changes_are_refused_at_their_argument_and_change_nothing() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let done = nu.json("orch submit --wait true | get id");
    let stashed = nu.json("orch submit --stash --label keep true | get id");
    let refusal = |script: &str, expected: &str| {
        let error = nu.try_run(script).unwrap_err();
        assert!(error.contains(expected), "{script}: {error}");
        error
    };
    refusal(
        &format!("orch edit {done} --priority 3"),
        "only a task that has not started",
    );
    refusal(
        &format!("orch stash {done}"),
        "only a task that has not started",
    );
    refusal(
        &format!("orch enqueue {done}"),
        "only a task that has not started",
    );
    let own = refusal(
        &format!("orch edit {stashed} --after [{stashed}]"),
        "submitted before it",
    );
    assert!(own.contains("--after"), "points at --after: {own}");
    refusal(
        &format!("orch edit {stashed} --after [999]"),
        "submitted before it",
    );
    refusal(&format!("orch edit {stashed}"), "nothing to edit");
    refusal(
        &format!("orch edit {stashed} --label a --no-label"),
        "a label and no label",
    );
    refusal(
        &format!("orch edit {stashed} --label ' '"),
        "the label is empty",
    );
    refusal(
        &format!("orch edit {stashed} --nu 'print hi' echo hi"),
        "give a command, Nushell code (--nu) or a script (--script), one of them",
    );
    refusal("orch submit --stash --wait true", "--wait with --stash");
    refusal(
        &format!("orch enqueue {stashed} --delay 1min --at (date now)"),
        "two start times",
    );
    refusal(
        &format!("orch enqueue {stashed} --at ((date now) + 400day)"),
        "more than a year away",
    );
    refusal("orch stash 999", "there is no task 999");
    // Nothing changed.
    let kept = nu.json(&format!(
        "orch task {stashed} | select status label command"
    ));
    assert_eq!(
        kept,
        json!({"status": "stashed", "label": "keep", "command": "true"})
    );
    assert_eq!(nu.json("orch tasks | length"), 2);
    // A refused request is audited like a granted one.
    let refused = nu.json("orch audit | where action == task_change | length");
    assert!(refused.as_u64().unwrap() >= 8, "{refused}");
}
