//! The live progress display of `orch wait`, `orch submit --wait`, `orch workflow submit
//! --wait` and `orch watch --live` through a real pseudo-terminal (`script` runs `nu` in
//! one and copies what it draws): a header with the counts and a bar per running task
//! with its progress and message, cleared before the answer; nothing on a pipe, and
//! nothing when the setting turns it off; and the stage of a test environment being
//! created.

use std::process::{Command, Stdio};

use orch_e2e::{Daemon, nu_binary};
use serde_json::json;

/// A task that reports 40% "installing db", then runs a little longer.
const TASK: &str = r#"orch submit --nu 'print ({progress: 40, message: "installing db"} | to json -r); sleep 2.5sec'"#;

/// Runs `script` (after loading the plugin) in `nu` under a pseudo-terminal; all it drew.
fn on_a_terminal(daemon: &Daemon, script: &str) -> String {
    let file = write_script(daemon, script);
    let line = format!(
        "'{}' --no-config-file --plugin-config '{}' '{}'",
        nu_binary().display(),
        daemon.dir().join("plugins.msgpackz").display(),
        file.display()
    );
    let out = Command::new("script")
        .args(["-qfec", &line, "/dev/null"])
        .env("PROVISIONING_ORCHESTRATOR_SOCKET", daemon.socket())
        .env("TERM", "xterm")
        .stdin(Stdio::null())
        .output()
        .expect("script (util-linux) runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The script file: the plugin loaded, then `script`.
fn write_script(daemon: &Daemon, script: &str) -> std::path::PathBuf {
    let file = daemon.dir().join("progress.nu");
    let text = format!(
        "plugin use --plugin-config '{}' orchestrator\n{script}\n",
        daemon.dir().join("plugins.msgpackz").display()
    );
    std::fs::write(&file, text).unwrap();
    file
}

/// What the display drew: the header, the task's bar, then, after the last drawing,
/// the clearing of its lines before the answer.
fn assert_drawn_then_cleared(drawn: &str, answer: &str) {
    let header = drawn
        .find("orch: 1 task · 1 running")
        .unwrap_or_else(|| panic!("no header: {drawn:?}"));
    drawn[header..]
        .find("40% installing db")
        .unwrap_or_else(|| panic!("no bar: {drawn:?}"));
    assert_last_drawing_cleared(drawn, answer);
}

/// The last drawing (its header) is followed by the clearing of its lines, then by
/// `answer`: nothing drawn stays.
fn assert_last_drawing_cleared(drawn: &str, answer: &str) {
    let last = drawn
        .rfind("orch: ")
        .unwrap_or_else(|| panic!("nothing drawn: {drawn:?}"));
    let cleared = drawn[last..]
        .find("\x1b[J")
        .map(|at| last + at)
        .unwrap_or_else(|| panic!("the last drawing is not cleared: {drawn:?}"));
    let answered = drawn
        .rfind(answer)
        .unwrap_or_else(|| panic!("no answer: {drawn:?}"));
    assert!(cleared < answered, "{drawn:?}");
}

#[test]
fn waits_draw_progress_on_a_terminal_and_clear_it() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let drawn = on_a_terminal(
        &daemon,
        &format!("let id = ({TASK} | get id)\nprint $'status: (orch wait $id | get 0.status)'"),
    );
    assert_drawn_then_cleared(&drawn, "status: succeeded");
    let drawn = on_a_terminal(
        &daemon,
        &format!("print $'submitted: ({TASK} --wait | get status)'"),
    );
    assert_drawn_then_cleared(&drawn, "submitted: succeeded");

    let off = on_a_terminal(
        &daemon,
        &format!(
            "$env.config.plugins.orchestrator = {{progress: false}}\nprint $'off: ({TASK} --wait | get status)'"
        ),
    );
    assert!(
        off.contains("off: succeeded") && !off.contains("orch: 1 task"),
        "{off:?}"
    );

    // A narrow terminal: no line is wider than it (none wraps and is left behind), and a
    // message with a line break and an escape sequence is one plain line.
    let hostile = r#"orch submit --nu 'print ({progress: 40, message: "two\nlines \u{1b}]0;title\u{7}"} | to json -r); sleep 2.5sec'"#;
    let narrow = on_a_terminal(
        &daemon,
        &format!("^stty cols 50\nprint $'narrow: ({hostile} --wait | get status)'"),
    );
    assert_last_drawing_cleared(&narrow, "narrow: succeeded");
    assert!(
        !narrow.contains("\x1b]0;"),
        "a task's escape sequence reaches the terminal: {narrow:?}"
    );
    assert!(narrow.contains("40% two lines"), "{narrow:?}");
    for line in narrow.split(['\n', '\r']) {
        // What follows the last escape sequence of the line is its text.
        let text = line.rsplit("\x1b[J").next().unwrap_or(line);
        if text.contains("orch: ") || text.contains("% two") {
            assert!(
                text.chars().count() <= 50,
                "{text:?} is wider than the terminal"
            );
        }
    }

    // Not on a terminal: nothing but the answer.
    let piped = nu
        .try_run(&format!("{TASK} --wait | get status"))
        .expect("the wait succeeds");
    assert_eq!(piped.trim(), "succeeded");
    let file = write_script(&daemon, &format!("{TASK} --wait | get status"));
    let out = Command::new(nu_binary())
        .args(["--no-config-file", "--plugin-config"])
        .arg(daemon.dir().join("plugins.msgpackz"))
        .arg(&file)
        .env("PROVISIONING_ORCHESTRATOR_SOCKET", daemon.socket())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("orch:") && !stderr.contains('\x1b'),
        "{stderr:?}"
    );
}

#[test]
fn watch_live_draws_a_task_or_a_workflow_until_its_end_and_refuses_what_it_cannot_draw() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let drawn = on_a_terminal(
        &daemon,
        &format!("let id = ({TASK} | get id)\norch watch --live --task $id\nprint 'watched'"),
    );
    assert_drawn_then_cleared(&drawn, "watched");

    // A workflow of two steps, one after the other: its line, then its running step's bar.
    let step = |id: &str, deps: &[&str]| {
        json!({"id": id, "type": "nu", "dependencies": deps,
            "nu": format!("print ({{progress: 40, message: 'installing {id}'}} | to json -r); sleep 1.5sec")})
    };
    let workflow = json!({"name": "two-steps", "operations": [step("a", &[]), step("b", &["a"])]});
    let drawn = on_a_terminal(
        &daemon,
        &format!(
            "let id = (r#'{workflow}'# | from json | orch workflow submit batch | get id)\norch watch --live --workflow $id\nprint $'workflow: (orch workflow show $id | get status)'"
        ),
    );
    let header = drawn
        .find("two-steps running · 2 steps")
        .unwrap_or_else(|| panic!("{drawn:?}"));
    let first = drawn[header..].find("40% installing a").expect("a's bar");
    let second = drawn[header + first..]
        .find("40% installing b")
        .expect("then b's bar");
    let answered = drawn
        .find("workflow: succeeded")
        .expect("it ends with the workflow");
    assert!(header + first + second < answered, "{drawn:?}");

    // A workflow submitted with --wait on a terminal is drawn the same way, and its
    // answer is the finished workflow.
    let drawn = on_a_terminal(
        &daemon,
        &format!(
            "print $'waited: (r#'{workflow}'# | from json | orch workflow submit batch --wait | get status)'"
        ),
    );
    drawn
        .find("two-steps running · 2 steps")
        .unwrap_or_else(|| panic!("{drawn:?}"));
    assert_last_drawing_cleared(&drawn, "waited: succeeded");
    let piped = nu.json(&format!(
        "r#'{workflow}'# | from json | orch workflow submit batch --wait | get status"
    ));
    assert_eq!(
        piped, "succeeded",
        "off a terminal the daemon waits, as before"
    );

    let not_a_terminal = nu.try_run("orch watch --live").unwrap_err();
    assert!(
        not_a_terminal.contains("--live draws on a terminal"),
        "{not_a_terminal}"
    );
    let replay = on_a_terminal_failing(&daemon, "orch watch --live --all");
    assert!(replay.contains("--all replays the event log"), "{replay}");
    let unknown = on_a_terminal_failing(&daemon, "orch watch --live --task 999");
    assert!(unknown.contains("there is no task 999"), "{unknown}");
    let unknown = on_a_terminal_failing(&daemon, "orch watch --live --workflow 998");
    assert!(unknown.contains("998"), "{unknown}");
}

/// Runs `script` on a terminal where it must fail; what it drew (its error).
fn on_a_terminal_failing(daemon: &Daemon, script: &str) -> String {
    on_a_terminal(
        daemon,
        &format!("try {{ {script} }} catch {{|e| print $e.rendered }}"),
    )
}

#[test]
fn creating_a_test_environment_shows_its_stage_on_a_terminal() {
    let Some((daemon, _nu, sweeper)) = orch_e2e::containers::env_daemon(&[]) else {
        return;
    };
    let drawn = on_a_terminal(
        &daemon,
        "print $'env: (orch test env create single redis --auto-start --auto-cleanup | get status)'",
    );
    drawn
        .find("orch: test environment 1 redis (single) · ")
        .unwrap_or_else(|| panic!("{drawn:?}"));
    assert_last_drawing_cleared(&drawn, "env: deleted");
    assert!(
        ["creating", "starting", "installing", "probing", "testing"]
            .iter()
            .any(|stage| drawn.contains(&format!("(single) · {stage} · 1 node"))),
        "a stage is shown: {drawn:?}"
    );
    assert_eq!(sweeper.leftovers(), (vec![], vec![]));
}
