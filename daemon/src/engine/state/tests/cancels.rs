//! Cancelling queued, running and retry-waiting tasks.

use orch_protocol::ErrorKind;
use orch_protocol::TaskStatus::{Blocked, Cancelled, DependencyFailed, Running, Succeeded};

use super::*;

#[test]
fn a_queued_task_is_cancelled_at_once_and_never_starts() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![task(), task()]);
    let (step, mut answer) = h.cancel(ids[1]);
    assert_eq!(step.written(), vec![(ids[1], Cancelled)]);
    assert_eq!(step.events(), events(&[(ids[1], "cancelled")]));
    assert!(step.effects.stops.is_empty());
    assert_eq!(step.batch.audit.len(), 1);
    assert_eq!(answer.value().state.status(), Cancelled);
    // Its stale queue entry is skipped when the slot frees.
    let step = h.exit(ids[0], 0);
    assert!(step.launched().is_empty());
    assert_eq!(h.status(ids[1]), Cancelled);
}

#[test]
fn a_running_task_is_stopped_and_the_cancel_answered_when_its_attempt_ends() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![task(), after(&[1])]);
    let (step, mut answer) = h.cancel(ids[0]);
    assert_eq!(step.effects.stops, vec![ids[0]]);
    assert!(
        step.written().is_empty(),
        "nothing changes until the attempt ends"
    );
    assert_eq!(step.batch.audit.len(), 1);
    assert!(answer.waiting());
    assert_eq!(h.status(ids[0]), Running);

    let step = h.report(ids[0], signalled());
    assert_eq!(
        step.written(),
        vec![(ids[0], Cancelled), (ids[1], DependencyFailed)]
    );
    let task = answer.value();
    assert_eq!(task.state.status(), Cancelled);
    assert_eq!(task.attempts[0].outcome, Some(AttemptOutcome::Cancelled));
}

#[test]
fn an_attempt_that_succeeds_while_being_cancelled_counts_as_a_success() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![task()]);
    let (_, mut answer) = h.cancel(ids[0]);
    h.exit(ids[0], 0);
    assert_eq!(answer.value().state.status(), Succeeded);
}

#[test]
fn a_task_waiting_to_retry_is_cancelled_with_its_dependants() {
    let mut h = Harness::new(2);
    let (_, ids) = h.submit(vec![retrying(3, 1_000), after(&[1]), after(&[2])]);
    h.exit(ids[0], 1);
    assert_eq!(h.status(ids[1]), Blocked);
    let (step, mut answer) = h.cancel(ids[0]);
    assert_eq!(
        step.written(),
        vec![
            (ids[0], Cancelled),
            (ids[1], DependencyFailed),
            (ids[2], DependencyFailed)
        ]
    );
    assert_eq!(answer.value().state.status(), Cancelled);
    for id in &ids[1..] {
        assert!(matches!(
            h.task(*id).state,
            TaskState::DependencyFailed { dependency: 1, .. }
        ));
    }
}

#[test]
fn a_finished_task_cannot_be_cancelled_and_only_the_refusal_is_recorded() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![task()]);
    h.exit(ids[0], 0);
    let (step, mut answer) = h.cancel(ids[0]);
    let error = answer.error();
    assert_eq!(error.kind, ErrorKind::Conflict);
    assert_eq!(error.field.as_deref(), Some("id"));
    assert!(step.written().is_empty() && step.batch.events.is_empty());
    assert_eq!(step.batch.audit.len(), 1, "the refusal is audited");
    let (_, mut answer) = h.cancel(99);
    assert_eq!(answer.error().kind, ErrorKind::NotFound);
}
