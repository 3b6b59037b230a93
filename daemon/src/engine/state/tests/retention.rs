//! The retention rule ([`super::super::retention`]): per-label retentions, the dependency
//! rule under a batch limit, and workflows removed as a unit only once final and old
//! enough.

use std::collections::BTreeMap;
use std::time::Duration;

use super::super::retention::{Keep, Rule, Selection, Tasks, select};
use super::*;

const MINUTE: i64 = 60 * 1000;

/// A retention run's rule: `keep` by default, `labels` overriding it.
fn rule(keep: Keep, labels: &[(&str, Keep)]) -> Rule {
    Rule {
        keep,
        labels: labels
            .iter()
            .map(|(l, k)| (l.to_string(), *k))
            .collect::<BTreeMap<_, _>>(),
        only_label: None,
        status: Vec::new(),
        workflows: true,
        limit: 10_000,
        retention: true,
    }
}

fn minutes(n: u64) -> Keep {
    Keep::For(Duration::from_secs(n * 60))
}

fn labelled(label: &str) -> TaskSpec {
    TaskSpec {
        label: Some(label.into()),
        ..task()
    }
}

/// What `rule` selects now, among the tasks held and the finished ones stored (as the
/// engine's clean reads them).
fn selected(h: &Harness, rule: &Rule) -> Selection {
    let stored: std::collections::HashMap<TaskId, Task> = h
        .stored
        .0
        .lock()
        .unwrap()
        .values()
        .filter(|t| t.state.status().is_final() && !h.state.tasks.contains_key(&t.id))
        .map(|t| (t.id, t.clone()))
        .collect();
    let tasks = Tasks {
        held: &h.state.tasks,
        stored: &stored,
    };
    select(&tasks, &h.state.workflows, rule, h.now)
}

fn tasks(ids: &[TaskId]) -> Selection {
    Selection {
        tasks: ids.to_vec(),
        workflows: Vec::new(),
    }
}

#[test]
fn a_label_keeps_its_tasks_longer_or_shorter_than_the_default_and_never_for_ever() {
    let mut h = Harness::new(8);
    h.submit(vec![
        task(),
        labelled("servers"),
        labelled("ci"),
        labelled("pinned"),
    ]);
    for id in 1..=4 {
        h.exit(id, 0);
    }
    let rule = rule(
        minutes(60),
        &[
            ("servers", minutes(120)),
            ("ci", minutes(5)),
            ("pinned", Keep::Forever),
        ],
    );
    assert_eq!(selected(&h, &rule), tasks(&[]));
    h.later(10 * MINUTE);
    assert_eq!(selected(&h, &rule), tasks(&[3]));
    h.later(60 * MINUTE);
    assert_eq!(selected(&h, &rule), tasks(&[1, 3]));
    h.later(24 * 60 * MINUTE);
    assert_eq!(selected(&h, &rule), tasks(&[1, 2, 3]));
}

#[test]
fn a_batch_limit_cuts_a_chain_from_its_end_and_never_strands_a_dependant() {
    let mut h = Harness::new(8);
    h.submit(vec![task(), after(&[1]), after(&[2]), after(&[3])]);
    for id in 1..=4 {
        h.exit(id, 0);
    }
    // 5 runs and needs 4 (and so everything before it).
    h.submit(vec![after(&[4])]);
    let mut limited = rule(minutes(1), &[]);
    limited.limit = 2;
    h.later(2 * MINUTE);
    assert_eq!(selected(&h, &limited), tasks(&[]), "task 5 is running");
    h.exit(5, 0);
    assert_eq!(selected(&h, &limited), tasks(&[]), "task 5 is too recent");
    h.later(2 * MINUTE);
    assert_eq!(selected(&h, &limited), tasks(&[4, 5]));
    // With 4 and 5 gone, the rest of the chain follows.
    for id in [4, 5] {
        h.state.tasks.remove(&id);
        h.stored.0.lock().unwrap().remove(&id);
    }
    assert_eq!(selected(&h, &limited), tasks(&[2, 3]));
}

#[test]
fn a_workflow_goes_as_a_unit_once_it_and_its_tasks_are_final_and_old_enough() {
    let mut h = Harness::new(8);
    let (_, summary) = h.submit_workflow(chain());
    let wf = summary.id;
    let (a, b) = (h.step_task(wf, "a"), h.step_task(wf, "b"));
    let keep = rule(minutes(10), &[]);
    h.exit(a, 0);
    h.later(60 * MINUTE);
    assert_eq!(selected(&h, &keep), tasks(&[]), "the workflow still runs");
    h.exit(b, 0);
    assert_eq!(selected(&h, &keep), tasks(&[]), "it just finished");
    h.later(11 * MINUTE);
    let whole = Selection {
        tasks: vec![a, b],
        workflows: vec![wf],
    };
    assert_eq!(selected(&h, &keep), whole);
    let without = Rule {
        workflows: false,
        ..keep.clone()
    };
    assert_eq!(selected(&h, &without), tasks(&[]), "steps never go alone");
    // A task outside the workflow that needs one of its steps keeps all of it.
    h.submit(vec![after(&[a])]);
    assert_eq!(selected(&h, &keep), tasks(&[]));
}

#[test]
fn a_workflow_is_kept_as_long_as_the_longest_of_its_tasks_labels_says() {
    let mut h = Harness::new(8);
    let mut long = chain();
    long.steps[1].spec.label = Some("servers".into());
    let (_, summary) = h.submit_workflow(long);
    let wf = summary.id;
    for step in ["a", "b"] {
        let id = h.step_task(wf, step);
        h.exit(id, 0);
    }
    let keep = rule(minutes(10), &[("servers", minutes(100))]);
    h.later(50 * MINUTE);
    assert_eq!(selected(&h, &keep), tasks(&[]));
    h.later(60 * MINUTE);
    assert_eq!(selected(&h, &keep).workflows, vec![wf]);
    let pinned = rule(minutes(10), &[("servers", Keep::Forever)]);
    assert_eq!(selected(&h, &pinned), tasks(&[]));
}

#[test]
fn a_failed_workflow_rolling_back_is_kept_with_its_compensations() {
    let mut h = Harness::new(8);
    let steps = [("a", &[][..], true), ("b", &["a"][..], false)];
    let (_, summary) = h.submit_workflow(draft(&steps, None, true));
    let wf = summary.id;
    let (a, b) = (h.step_task(wf, "a"), h.step_task(wf, "b"));
    h.exit(a, 0);
    h.exit(b, 1);
    let undo = h.compensation(wf, "a", 1);
    h.later(60 * MINUTE);
    let keep = rule(minutes(1), &[]);
    assert_eq!(selected(&h, &keep), tasks(&[]), "the rollback runs");
    h.exit(undo, 0);
    h.later(2 * MINUTE);
    let whole = Selection {
        tasks: vec![a, b, undo],
        workflows: vec![wf],
    };
    assert_eq!(selected(&h, &keep), whole);
}

#[test]
fn a_retention_run_that_removes_nothing_writes_nothing() {
    let mut h = Harness::new(8);
    h.submit(vec![task()]);
    h.exit(1, 0);
    let (step, mut answer) = h.ask(|reply| Command::Clean {
        actor: actor(),
        rule: rule(minutes(10), &[]),
        reply,
    });
    assert!(answer.value().is_empty());
    assert!(step.batch.is_empty(), "no audit record, no event");
    h.later(11 * MINUTE);
    let (step, mut answer) = h.ask(|reply| Command::Clean {
        actor: actor(),
        rule: rule(minutes(10), &[]),
        reply,
    });
    assert_eq!(answer.value(), tasks(&[1]));
    assert_eq!(step.batch.audit.len(), 1);
    assert_eq!(step.events(), events(&[(1, "removed")]));
}
