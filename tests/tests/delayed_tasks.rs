//! Start times through the real plugin and daemon: `orch submit --delay` and `--at`, the
//! task `delayed` until its time, the wait surviving a kill -9, a cancel while it waits,
//! and the refusals of bad start times.

use std::time::Duration;

use orch_e2e::{Daemon, eventually};

/// Seconds from task `id`'s submission to its first attempt's start.
fn waited(nu: &orch_e2e::Nu, id: &serde_json::Value) -> f64 {
    let ms = nu.json(&format!(
        "orch task {id} | (($in.attempt_history.0.started - $in.submitted) / 1ms)"
    ));
    ms.as_f64().unwrap() / 1000.0
}

#[test]
fn a_delayed_task_waits_for_its_time_even_across_a_kill_9() {
    let mut daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let task = nu.json("orch submit --delay 3sec --label later echo later | select id status");
    assert_eq!(task["status"], "delayed");
    let id = task["id"].clone();
    let until = nu.json(&format!(
        "orch task {id} | get state.until | format date '%+'"
    ));
    assert!(until.as_str().is_some_and(|u| !u.is_empty()), "{until}");
    let shown = nu.json(&format!(
        "(orch task {id} | get not_before) == ('{}' | into datetime)",
        until.as_str().unwrap()
    ));
    assert_eq!(shown, true, "its start time is shown");
    assert_eq!(
        nu.json("orch tasks --status delayed | get id"),
        serde_json::json!([id])
    );
    daemon.kill9();
    daemon.restart();
    let done = nu.json(&format!("orch wait {id} | get 0.status"));
    assert_eq!(done, "succeeded");
    // Its time is the client's clock plus the delay: the start comes at or after it.
    let on_time = nu.json(&format!(
        "(orch task {id} | get attempt_history.0.started) >= ('{}' | into datetime)",
        until.as_str().unwrap()
    ));
    assert_eq!(on_time, true, "started at or after {until}");
    let waited = waited(&nu, &id);
    assert!(
        waited > 2.9,
        "about three seconds after its submission: {waited}"
    );
    assert_eq!(nu.run(&format!("orch logs {id}")), "later\n");
    let events = nu.json(&format!("orch watch --task {id} | get event"));
    assert_eq!(
        events,
        serde_json::json!(["submitted", "queued", "started", "succeeded"])
    );
}

#[test]
fn dependencies_come_first_and_a_time_gone_by_starts_at_once() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let first = nu.json("orch submit --nu 'sleep 1sec' | get id");
    let second = nu.json(&format!(
        "orch submit --after {first} --delay 2sec true | get status"
    ));
    assert_eq!(second, "blocked");
    let id = nu.json("orch tasks | first | get id");
    eventually(
        Duration::from_secs(10),
        "delayed once its dependency is done",
        || (nu.json(&format!("orch task {id} | get status")) == "delayed").then_some(()),
    );
    assert_eq!(
        nu.json(&format!("orch wait {id} | get 0.status")),
        "succeeded"
    );
    let past = nu.json("orch submit --at ((date now) - 1day) --wait true | get status");
    assert_eq!(past, "succeeded");
}

#[test]
fn a_delayed_task_is_cancelled_at_once_and_bad_start_times_are_refused() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let id = nu.json("orch submit --delay 1hr true | get id");
    assert_eq!(
        nu.json(&format!("orch cancel {id} | get status")),
        "cancelled"
    );
    let both = nu
        .try_run("orch submit --at (date now) --delay 1min true")
        .unwrap_err();
    assert!(both.contains("two start times"), "{both}");
    let negative = nu.try_run("orch submit --delay (-1sec) true").unwrap_err();
    assert!(negative.contains("delay"), "{negative}");
    let far = nu
        .try_run("orch submit --at ((date now) + 400day) true")
        .unwrap_err();
    assert!(far.contains("more than a year away"), "{far}");
    let in_a_record = nu
        .try_run("[{command: [true], at: (date now), delay: 1min}] | orch submit")
        .unwrap_err();
    assert!(in_a_record.contains("two start times"), "{in_a_record}");
    let not_a_date = nu.try_run("orch submit --at tomorrow true").unwrap_err();
    assert!(not_a_date.contains("at"), "{not_a_date}");
    // Nothing was created by the refusals.
    assert_eq!(nu.json("orch tasks | length"), 1);
}
