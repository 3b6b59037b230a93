//! `orch clean`: finished tasks removed, except what kept tasks depend on.

use std::time::Duration;

use orch_protocol::{ErrorKind, TaskStatus};

use super::super::retention::{Keep, Rule};
use super::*;

/// The rule of an `orch clean` of `status` (all final states when empty), `age` old.
fn filter(status: Vec<TaskStatus>, age_ms: u64) -> Rule {
    Rule {
        keep: Keep::For(Duration::from_millis(age_ms)),
        labels: Default::default(),
        only_label: None,
        status,
        workflows: false,
        limit: 10_000,
        retention: false,
    }
}

fn clean(h: &mut Harness, rule: Rule) -> (Step, Answered<Vec<TaskId>>) {
    let (step, mut answer) = h.ask(|reply| Command::Clean {
        actor: actor(),
        rule,
        reply,
    });
    let (tx, rx) = oneshot::channel();
    let _ = tx.send(answer.result().map(|s| s.tasks));
    (step, Answered(rx))
}

#[test]
fn clean_keeps_what_kept_tasks_depend_on_and_deletes_the_logs_once_durable() {
    let mut h = Harness::new(8);
    // 1 succeeded, needed by 2 (still running); 3 succeeded, needed by nothing; 4
    // succeeded, needed (softly) by 5, which failed and is not selected.
    let specs = vec![
        task(),
        after(&[1]),
        task(),
        task(),
        TaskSpec {
            soft_after: vec![4],
            ..task()
        },
    ];
    h.submit(specs);
    for id in [1, 3, 4] {
        h.exit(id, 0);
    }
    h.exit(5, 1);
    let (step, mut answer) = clean(&mut h, filter(vec![TaskStatus::Succeeded], 0));
    assert_eq!(answer.value(), vec![3]);
    let removed: Vec<_> = step.batch.removals.iter().map(|t| t.id).collect();
    assert_eq!(removed, vec![3]);
    assert_eq!(step.effects.removed_logs, vec![3]);
    assert_eq!(step.events(), events(&[(3, "removed")]));
    assert!(h.stored.get(3).is_none());
    assert!(h.stored.get(1).is_some() && h.stored.get(4).is_some());
}

#[test]
fn clean_by_age_measures_from_the_engines_clock() {
    let mut h = Harness::new(8);
    h.submit(vec![task()]);
    h.exit(1, 0);
    h.later(60 * 60 * 1000);
    let older_than = |minutes: u64| filter(Vec::new(), minutes * 60 * 1000);
    assert!(clean(&mut h, older_than(61)).1.value().is_empty());
    assert_eq!(clean(&mut h, older_than(59)).1.value(), vec![1]);
}

#[test]
fn clean_refuses_a_state_that_is_not_final() {
    let mut h = Harness::new(8);
    h.submit(vec![task()]);
    let (step, mut answer) = clean(&mut h, filter(vec![TaskStatus::Running], 0));
    let error = answer.error();
    assert_eq!(
        (error.kind, error.field.as_deref()),
        (ErrorKind::BadRequest, Some("status"))
    );
    assert!(step.batch.removals.is_empty() && step.effects.removed_logs.is_empty());
}
