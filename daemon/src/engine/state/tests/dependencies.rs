//! Hard dependencies (a failure skips dependants), soft ones (any end releases them), and
//! retries reviving what a failure skipped.

use orch_protocol::ErrorKind;
use orch_protocol::TaskStatus::{Blocked, DependencyFailed, Failed, Queued, Running, Succeeded};

use super::*;

/// A soft dependency on `ids`.
fn soft_after(ids: &[TaskId]) -> TaskSpec {
    TaskSpec {
        soft_after: ids.to_vec(),
        ..task()
    }
}

#[test]
fn a_success_releases_its_dependants_in_the_same_step() {
    let mut h = Harness::new(4);
    let (step, ids) = h.submit(vec![task(), after(&[1]), after(&[1, 2])]);
    assert_eq!(step.launched(), vec![1]);
    assert!(matches!(&h.task(3).state, TaskState::Blocked { waiting_on } if waiting_on == &[1, 2]));
    let step = h.exit(ids[0], 0);
    // Task 3 still waits for 2: its record is rewritten, still blocked, without an event.
    assert_eq!(
        step.written(),
        vec![(1, Succeeded), (2, Queued), (3, Blocked), (2, Running)]
    );
    assert_eq!(
        step.events(),
        events(&[(1, "succeeded"), (2, "queued"), (2, "started")])
    );
    assert_eq!(step.launched(), vec![2]);
    let step = h.exit(2, 0);
    assert_eq!(step.launched(), vec![3]);
}

#[test]
fn a_failure_skips_every_hard_dependant_and_releases_the_soft_ones() {
    let mut h = Harness::new(4);
    let (_, ids) = h.submit(vec![task(), after(&[1]), after(&[2]), soft_after(&[1])]);
    let step = h.exit(ids[0], 1);
    assert_eq!(
        step.written(),
        vec![
            (1, Failed),
            (2, DependencyFailed),
            (4, Queued),
            (3, DependencyFailed),
            (4, Running)
        ]
    );
    assert_eq!(step.launched(), vec![4]);
    // Each skipped task names the task that failed first.
    for id in [2, 3] {
        assert!(matches!(
            h.task(id).state,
            TaskState::DependencyFailed { dependency: 1, .. }
        ));
    }
}

#[test]
fn a_retry_revives_the_dependants_its_failure_skipped() {
    let mut h = Harness::new(4);
    let (_, ids) = h.submit(vec![task(), after(&[1]), after(&[2])]);
    h.exit(ids[0], 1);
    let (step, mut answer) = h.retry(1);
    assert_eq!(
        step.written(),
        vec![(1, Queued), (2, Blocked), (3, Blocked), (1, Running)]
    );
    assert_eq!(
        step.events(),
        events(&[
            (1, "retried"),
            (2, "retried"),
            (3, "retried"),
            (1, "started")
        ])
    );
    assert_eq!(answer.value().state.status(), Queued);
    assert_eq!(step.effects.launches[0].attempt, 2);
    // A fresh round: the retry budget starts again.
    assert_eq!(h.task(1).attempts_in_round(), 1);
    h.exit(1, 0);
    assert_eq!(h.exit(2, 0).launched(), vec![3]);
}

#[test]
fn a_retry_is_refused_while_a_dependency_did_not_succeed() {
    let mut h = Harness::new(4);
    h.submit(vec![task(), after(&[1])]);
    h.exit(1, 1);
    let (step, mut answer) = h.retry(2);
    let error = answer.error();
    assert_eq!(error.kind, ErrorKind::Conflict);
    assert!(
        error.message.contains("depends on task 1"),
        "{}",
        error.message
    );
    assert!(step.written().is_empty());
    let (_, mut answer) = h.retry(1);
    assert!(answer.result().is_ok());
}

#[test]
fn a_submission_naming_an_unknown_or_later_task_creates_nothing() {
    let mut h = Harness::new(1);
    let specs = vec![task(), after(&[99])];
    let (step, error) = h.submit_refused(specs);
    assert_eq!(error.field.as_deref(), Some("after"));
    assert!(
        error.message.contains("task 99, which does not exist"),
        "{}",
        error.message
    );
    assert!(step.written().is_empty() && step.launched().is_empty());
    assert_eq!(step.batch.audit.len(), 1);
    let specs = vec![after(&[2]), task()];
    let (_, error) = h.submit_refused(specs);
    assert!(error.message.contains("at or after it"));
    let (_, ids) = h.submit(vec![task()]);
    assert_eq!(ids, vec![1], "refused submissions use no ids");
}
