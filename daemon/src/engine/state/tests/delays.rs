//! Start times (`not_before`): a task is delayed until its time, then queued by a timer;
//! dependencies come first; the timer survives a restart; a cancel ends the wait.

use orch_protocol::TaskStatus::{Blocked, Cancelled, Delayed, Queued, Running, Succeeded};

use super::*;

/// [`task`] not started before `h`'s clock plus `ms`.
fn at(h: &Harness, ms: i64) -> TaskSpec {
    TaskSpec {
        not_before: Some(h.now + chrono::Duration::milliseconds(ms)),
        ..task()
    }
}

#[test]
fn a_task_waits_for_its_start_time_then_runs() {
    let mut h = Harness::new(1);
    let spec = at(&h, 5_000);
    let until = spec.not_before.unwrap();
    let (step, ids) = h.submit(vec![spec]);
    let id = ids[0];
    assert_eq!(step.written(), vec![(id, Delayed)]);
    assert!(step.launched().is_empty());
    assert!(matches!(h.task(id).state, TaskState::Delayed { until: u } if u == until));
    let timer = step.effects.timers[0];
    assert_eq!((timer.id, timer.next_attempt, timer.due), (id, 1, until));
    h.now = until;
    let step = h.fire(timer);
    assert_eq!(step.written(), vec![(id, Queued), (id, Running)]);
    assert_eq!(h.exit(id, 0).written(), vec![(id, Succeeded)]);
}

#[test]
fn a_start_time_gone_by_queues_the_task_at_once() {
    let mut h = Harness::new(1);
    let (step, ids) = h.submit(vec![at(&h, -1_000)]);
    assert_eq!(step.written(), vec![(ids[0], Queued), (ids[0], Running)]);
    assert!(step.effects.timers.is_empty());
}

#[test]
fn dependencies_first_then_the_start_time() {
    let mut h = Harness::new(2);
    let (_, first) = h.submit(vec![task()]);
    let mut spec = at(&h, 10_000);
    spec.after = first.clone();
    let (step, ids) = h.submit(vec![spec]);
    let id = ids[0];
    assert_eq!(step.written(), vec![(id, Blocked)]);
    let step = h.exit(first[0], 0);
    assert_eq!(step.written(), vec![(first[0], Succeeded), (id, Delayed)]);
    assert_eq!(
        step.events(),
        events(&[(first[0], "succeeded"), (id, "delayed")])
    );
    let timer = step.effects.timers[0];
    h.now = timer.due;
    assert_eq!(h.fire(timer).launched(), vec![id]);
}

#[test]
fn a_delayed_task_is_cancelled_at_once_and_its_timer_ignored() {
    let mut h = Harness::new(1);
    let (step, ids) = h.submit(vec![at(&h, 5_000)]);
    let timer = step.effects.timers[0];
    let (step, _) = h.cancel(ids[0]);
    assert_eq!(step.written(), vec![(ids[0], Cancelled)]);
    h.now = timer.due;
    assert!(h.fire(timer).written().is_empty());
}

#[test]
fn a_restart_rearms_the_start_time() {
    let mut h = Harness::new(1);
    let (step, ids) = h.submit(vec![at(&h, 60_000)]);
    let timer = step.effects.timers[0];
    let later = h.now + chrono::Duration::milliseconds(1_000);
    let (mut h, step) = h.restarted(1, later);
    assert_eq!(
        step.effects.timers,
        vec![timer],
        "re-armed for the same time"
    );
    assert!(step.launched().is_empty());
    h.now = timer.due;
    assert_eq!(h.fire(timer).launched(), ids);
}

#[test]
fn a_start_time_more_than_a_year_away_is_refused_naming_the_field() {
    let mut h = Harness::new(1);
    let (_, error) = h.submit_refused(vec![at(&h, 400 * 24 * 3600 * 1000)]);
    assert_eq!(error.field.as_deref(), Some("not_before"));
    assert!(
        error.message.contains("more than a year away"),
        "{}",
        error.message
    );
}

#[test]
fn a_timer_that_fires_before_the_start_time_waits_again() {
    let mut h = Harness::new(1);
    let (step, ids) = h.submit(vec![at(&h, 5_000)]);
    let timer = step.effects.timers[0];
    // The wall clock was set back: the timer fires a second before the start time.
    h.now = timer.due - chrono::Duration::seconds(1);
    let step = h.turn(vec![Input::RetryDue {
        id: timer.id,
        next_attempt: timer.next_attempt,
    }]);
    assert!(step.written().is_empty() && step.launched().is_empty());
    assert_eq!(
        step.effects.timers,
        vec![timer],
        "armed again for the same time"
    );
    h.now = timer.due;
    assert_eq!(h.fire(timer).launched(), ids);
}

#[test]
fn a_retried_task_waits_for_its_start_time_again() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![at(&h, 60_000)]);
    let id = ids[0];
    h.cancel(id);
    let (step, mut answer) = h.retry(id);
    assert_eq!(answer.value().state.status(), Delayed);
    assert_eq!(step.written(), vec![(id, Delayed)]);
    assert_eq!(step.effects.timers.len(), 1);
}
