//! Workflows end to end: batch DAGs run in their planned waves under the limits, soft and
//! hard dependencies, rollback in reverse dependency order, `kill -9` mid-workflow and
//! mid-rollback, and bad definitions rejected with messages that name the problem.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use orch_e2e::{Daemon, Nu, eventually};
use serde_json::{Value, json};

/// A `nu` operation that logs `<id> start <ns>` and `<id> end <ns>` lines to `log.txt`
/// around a pause, and optionally fails.
fn step(id: &str, deps: &[&str], pause_ms: u64, fail: bool) -> Value {
    let code = format!(
        "$\"{id} start (date now | into int)\\n\" | save -a log.txt; sleep {pause_ms}ms; {}$\"{id} end (date now | into int)\\n\" | save -a log.txt",
        if fail { "exit 3; " } else { "" }
    );
    json!({"id": id, "type": "nu", "nu": code, "dependencies": deps,
           "rollback": format!("\"r{id}\\n\" | save -a rollback.txt")})
}

/// Submits a workflow given as JSON (through NUON) and waits for its end.
fn run(nu: &Nu, workflow: &Value) -> Value {
    nu.json(&format!(
        "'{}' | from json | orch workflow submit batch --wait | reject request",
        workflow
    ))
}

/// Start and end times of each step, from `log.txt`.
fn intervals(dir: &Path) -> HashMap<String, (u128, u128)> {
    let log = std::fs::read_to_string(dir.join("log.txt")).unwrap_or_default();
    let mut spans: HashMap<String, (u128, u128)> = HashMap::new();
    for line in log.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        let entry = spans.entry(parts[0].to_string()).or_insert((0, 0));
        let at: u128 = parts[2].parse().unwrap();
        if parts[1] == "start" {
            entry.0 = at;
        } else {
            entry.1 = at;
        }
    }
    spans
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn step_status(workflow: &Value, step: &str) -> String {
    workflow["step_list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == step)
        .map(|s| s["status"].as_str().unwrap().to_string())
        .unwrap()
}

#[test]
fn a_three_level_dag_runs_in_its_planned_waves_under_the_workflow_limit() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let workflow = json!({"name": "three-levels", "parallel_limit": 2, "operations": [
        step("a", &[], 400, false), step("b", &[], 400, false), step("c", &[], 400, false),
        step("d", &["a", "b"], 400, false), step("e", &["c", "d"], 400, false),
    ]});
    let plan = nu.json(&format!(
        "'{workflow}' | from json | orch workflow submit batch --check"
    ));
    assert_eq!(plan["waves"], json!([["a", "b"], ["c", "d"], ["e"]]));
    assert_eq!(
        plan["rollback_waves"],
        json!([["e"], ["c", "d"], ["a", "b"]])
    );
    let done = run(&nu, &workflow);
    assert_eq!(done["status"], "succeeded", "{done}");
    let spans = intervals(daemon.dir());
    // Every step started after its dependencies ended.
    for (step, deps) in [("d", vec!["a", "b"]), ("e", vec!["c", "d"])] {
        for dep in deps {
            assert!(
                spans[step].0 >= spans[dep].1,
                "{step} started before {dep} ended"
            );
        }
    }
    // Never more than two at once, and the starts follow the planned waves.
    let mut by_start: Vec<(&String, &(u128, u128))> = spans.iter().collect();
    by_start.sort_by_key(|(_, (start, _))| *start);
    for (i, (_, (start, _))) in by_start.iter().enumerate() {
        let overlapping = by_start[..i]
            .iter()
            .filter(|(_, (_, end))| end > start)
            .count();
        assert!(overlapping < 2, "three steps ran at once: {by_start:?}");
    }
    let order: Vec<&str> = by_start.iter().map(|(id, _)| id.as_str()).collect();
    let mut first_two = order[..2].to_vec();
    first_two.sort_unstable();
    let mut next_two = order[2..4].to_vec();
    next_two.sort_unstable();
    assert_eq!(
        (first_two, next_two, order[4]),
        (vec!["a", "b"], vec!["c", "d"], "e")
    );
}

#[test]
fn a_failed_step_rolls_back_the_completed_steps_in_reverse_dependency_order() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    // a → b → c → fails; a → d (no compensation); slow runs beside and is stopped.
    let mut d = step("d", &["a"], 10, false);
    d.as_object_mut().unwrap().remove("rollback");
    let workflow = json!({"name": "rollback", "rollback_enabled": true, "operations": [
        step("a", &[], 10, false), step("b", &["a"], 10, false), step("c", &["b"], 10, false),
        d, step("slow", &[], 30_000, false), step("fails", &["c"], 10, true),
    ]});
    let done = run(&nu, &workflow);
    assert_eq!(done["status"], "rolled_back", "{done}");
    assert_eq!(done["reason"], "step fails failed");
    assert_eq!(step_status(&done, "slow"), "cancelled");
    let compensations = lines(&daemon.dir().join("rollback.txt"));
    assert_eq!(
        compensations,
        ["rc", "rb", "ra"],
        "reverse dependency order"
    );
    let rolled: Vec<&str> = done["rollback"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["step"].as_str().unwrap())
        .collect();
    assert_eq!(
        rolled,
        ["c", "b", "a"],
        "only completed steps with a compensation"
    );
    // The workflow's events end with its final state, in order.
    let events = nu.json(&format!(
        "orch watch --workflow {} --all | where event == workflow | get details.status",
        done["id"]
    ));
    assert_eq!(
        events,
        json!(["running", "rolling_back", "rolling_back", "rolled_back"])
    );
}

#[test]
fn soft_dependants_run_after_a_failure_and_hard_ones_are_skipped() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let mut soft = step("soft", &[], 10, false);
    soft["soft_dependencies"] = json!(["a"]);
    let workflow = json!({"name": "soft", "operations": [
        step("a", &[], 10, true), soft, step("hard", &["a"], 10, false),
    ]});
    let done = run(&nu, &workflow);
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(done["failed"], json!(["a", "hard"]));
    assert_eq!(step_status(&done, "soft"), "succeeded");
    assert_eq!(step_status(&done, "hard"), "dependency_failed");
    assert!(
        !daemon.dir().join("rollback.txt").exists(),
        "no rollback without rollback_enabled"
    );
    // A step of a finished workflow is not retried behind the workflow's back.
    let failed_task = done["step_list"][0]["task"].clone();
    let error = nu
        .try_run(&format!("orch retry {failed_task}"))
        .unwrap_err();
    assert!(
        error.contains("roll the workflow back or submit it again"),
        "{error}"
    );
    // A manual rollback compensates what completed.
    let rolled = nu.json(&format!("orch workflow rollback {} | get id", done["id"]));
    let done = nu.json(&format!(
        "orch watch --workflow {rolled} --all | last | ignore; orch workflow show {rolled} | reject request"
    ));
    assert_eq!(done["status"], "rolled_back", "{done}");
    assert_eq!(lines(&daemon.dir().join("rollback.txt")), ["rsoft"]);
}

/// Waits until `file` has a line equal to `line`.
fn wait_for_line(file: &Path, line: &str) {
    eventually(Duration::from_secs(30), line, || {
        lines(file).iter().any(|l| l == line).then_some(())
    });
}

/// A step that appends its id to `runs.txt`, then pauses.
fn counted(id: &str, deps: &[&str], pause_ms: u64, fail: bool) -> Value {
    json!({"id": id, "type": "nu", "dependencies": deps,
           "nu": format!("\"{id}\\n\" | save -a runs.txt; sleep {pause_ms}ms{}", if fail { "; exit 1" } else { "" }),
           "rollback": format!("\"r{id}\\n\" | save -a rollback.txt; sleep {pause_ms}ms")})
}

#[test]
fn kill_9_mid_workflow_resumes_without_rerunning_succeeded_steps() {
    let mut daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let workflow = json!({"name": "chain", "operations": [
        counted("s1", &[], 10, false), counted("s2", &["s1"], 10, false),
        counted("s3", &["s2"], 3_000, false), counted("s4", &["s3"], 10, false),
    ]});
    let id = nu.json(&format!(
        "'{workflow}' | from json | orch workflow submit batch | get id"
    ));
    wait_for_line(&daemon.dir().join("runs.txt"), "s3");
    daemon.kill9();
    daemon.restart();
    let done = nu.json(&format!(
        "orch watch --workflow {id} --all | last | ignore; orch workflow show {id} | reject request"
    ));
    assert_eq!(done["status"], "succeeded", "{done}");
    // s3 went on under its supervisor and ran once; the steps that had succeeded did not
    // run again.
    assert_eq!(
        lines(&daemon.dir().join("runs.txt")),
        ["s1", "s2", "s3", "s4"]
    );
}

#[test]
fn kill_9_mid_rollback_resumes_the_rollback() {
    let mut daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let workflow = json!({"name": "crash-in-rollback", "rollback_enabled": true, "operations": [
        counted("a", &[], 3_000, false), counted("b", &["a"], 10, false),
        counted("c", &["b"], 10, true),
    ]});
    let id = nu.json(&format!(
        "'{workflow}' | from json | orch workflow submit batch | get id"
    ));
    // rb is quick; ra pauses 3 s: kill the daemon while it runs.
    wait_for_line(&daemon.dir().join("rollback.txt"), "ra");
    daemon.kill9();
    daemon.restart();
    let done = nu.json(&format!(
        "orch watch --workflow {id} --all | last | ignore; orch workflow show {id} | reject request"
    ));
    assert_eq!(done["status"], "rolled_back", "{done}");
    assert_eq!(
        lines(&daemon.dir().join("runs.txt")),
        ["a", "b", "c"],
        "no step ran again"
    );
    assert_eq!(
        lines(&daemon.dir().join("rollback.txt")),
        ["rb", "ra"],
        "the running compensation went on under its supervisor, the finished one did not run again"
    );
}

#[test]
fn bad_workflows_are_rejected_with_the_problem_named_and_nothing_created() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    std::fs::create_dir_all(daemon.dir().join("infra/demo")).unwrap();
    std::fs::write(
        daemon.dir().join("infra/demo/settings.toml"),
        "provider = \"local\"\n[[servers]]\nhostname = \"web-01\"\n",
    )
    .unwrap();
    let cases = [
        (
            "{name: c, operations: [{id: a, type: nu, nu: '1', dependencies: [c]} {id: b, type: nu, nu: '1', dependencies: [a]} {id: c, type: nu, nu: '1', dependencies: [b]}]} | orch workflow submit batch",
            "the dependencies form a cycle: ",
        ),
        (
            "{name: u, operations: [{id: a, type: nu, nu: '1', dependencies: [ghost]}]} | orch workflow submit batch",
            "step `a` depends on `ghost`, which is not a step of this workflow",
        ),
        (
            "orch workflow submit servers --infra nowhere",
            "unknown infra `nowhere`",
        ),
        (
            "orch workflow submit servers web-09 --infra demo",
            "unknown server `web-09` in infra `demo` (its servers: web-01)",
        ),
        (
            "orch workflow submit taskserv mysql --infra demo",
            "unknown taskserv `mysql` (known: ",
        ),
        (
            "orch workflow submit cluster nope --infra demo",
            "unknown cluster definition `nope`",
        ),
        (
            "{name: t, operations: [{id: a, type: teleport}]} | orch workflow submit batch",
            "unknown operation type `teleport`",
        ),
        (
            "{name: t, parralel_limit: 2, operations: []} | orch workflow submit batch",
            "unknown field `parralel_limit`",
        ),
    ];
    for (script, expected) in cases {
        let error = nu.try_run(script).expect_err(script);
        assert!(error.contains(expected), "{script}\n{error}");
    }
    let cycle = nu.try_run(cases[0].0).unwrap_err();
    assert!(
        ["a → c → b → a", "b → a → c → b", "c → b → a → c"]
            .iter()
            .any(|c| cycle.contains(c)),
        "{cycle}"
    );
    let created =
        nu.json("{workflows: (orch workflow list | length), tasks: (orch tasks | length)}");
    assert_eq!(created, json!({"workflows": 0, "tasks": 0}));
}

#[test]
fn a_nickel_workflow_without_nickel_installed_says_so() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    std::fs::write(
        daemon.dir().join("w.ncl"),
        "{ name = \"x\", operations = [{ id = \"a\", type = \"nu\", nu = \"1\" }] }",
    )
    .unwrap();
    let which = std::process::Command::new("sh")
        .args(["-c", "command -v nickel"])
        .output()
        .unwrap();
    if which.status.success() {
        let plan = nu.json("orch workflow plan w.ncl | get name");
        assert_eq!(plan, json!("x"));
    } else {
        let error = nu.try_run("orch workflow plan w.ncl").unwrap_err();
        assert!(
            error.contains("the `nickel` binary is not installed"),
            "{error}"
        );
    }
}

#[test]
fn a_restart_from_a_step_runs_it_and_its_dependants_and_undoes_only_its_own_steps() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let fixed = daemon.dir().join("fixed");
    let check = format!("if not ('{}' | path exists) {{ exit 3 }}", fixed.display());
    let workflow = json!({"name": "pipeline", "rollback_enabled": false, "operations": [
        step("build", &[], 0, false),
        {"id": "test", "type": "nu", "nu": check, "dependencies": ["build"], "rollback": "'rtest\n' | save -a rollback.txt"},
        step("ship", &["test"], 0, false),
        step("docs", &["build"], 0, false),
    ]});
    let failed = run(&nu, &workflow);
    assert_eq!(failed["status"], "failed", "{failed}");
    let id = &failed["id"];
    // A bad step is named at the flag; a step whose dependency failed says which to use.
    let err = nu
        .try_run(&format!("orch workflow restart {id} --from nope"))
        .unwrap_err();
    assert!(err.contains("has no step `nope`"), "{err}");
    let err = nu
        .try_run(&format!("orch workflow restart {id} --from ship"))
        .unwrap_err();
    assert!(err.contains("restart from `test` instead"), "{err}");
    std::fs::write(&fixed, "").unwrap();
    let restarted = nu.json(&format!(
        "let w = (orch workflow restart {id} --from test); orch watch --workflow $w.id --all | last | ignore; orch workflow show $w.id | reject request"
    ));
    assert_eq!(restarted["status"], "succeeded", "{restarted}");
    let steps: Vec<&str> = restarted["step_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["test", "ship"], "build and docs are not run again");
    let starts = lines(&daemon.dir().join("log.txt"));
    let builds = starts
        .iter()
        .filter(|l| l.starts_with("build start"))
        .count();
    assert_eq!(builds, 1, "{starts:?}");
    // The new workflow's rollback compensates its own steps only.
    let rolled = nu.roll_back(&restarted["id"]);
    assert_eq!(rolled["status"], "rolled_back", "{rolled}");
    let undone = lines(&daemon.dir().join("rollback.txt"));
    assert_eq!(
        undone,
        ["rship", "rtest"],
        "build was not this workflow's to undo"
    );
}
