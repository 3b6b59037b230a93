//! Failed attempts: retries after a backoff, and starts deferred for lack of resources.

use std::time::Duration;

use orch_protocol::TaskStatus::{Cancelled, Failed, Queued, RetryWaiting, Running};

use super::*;
use crate::engine::state::attempts::START_RETRY_DELAY;

/// The delay from `h`'s clock to the only timer armed by `step`.
fn armed_delay(h: &Harness, step: &Step) -> Duration {
    assert_eq!(step.effects.timers.len(), 1);
    (step.effects.timers[0].due - h.now).to_std().unwrap()
}

#[test]
fn a_failed_attempt_waits_its_growing_backoff_then_runs_again_until_retries_run_out() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![retrying(2, 1_000)]);
    let id = ids[0];
    let step = h.exit(id, 3);
    assert_eq!(step.written(), vec![(id, RetryWaiting)]);
    assert_eq!(step.events(), events(&[(id, "attempt_failed")]));
    assert!(step.launched().is_empty());
    let delay = armed_delay(&h, &step);
    assert!((500..=1_000).contains(&delay.as_millis()), "{delay:?}");
    let timer = step.effects.timers[0];
    assert_eq!((timer.id, timer.next_attempt), (id, 2));
    assert!(
        matches!(h.task(id).state, TaskState::RetryWaiting { next_attempt: 2, retry_at } if retry_at == timer.due)
    );

    let step = h.fire(timer);
    assert_eq!(step.written(), vec![(id, Queued), (id, Running)]);
    assert_eq!(step.events(), events(&[(id, "queued"), (id, "started")]));
    assert_eq!(step.effects.launches[0].attempt, 2);

    let step = h.exit(id, 3);
    let delay = armed_delay(&h, &step);
    assert!(
        (1_000..=2_000).contains(&delay.as_millis()),
        "doubled: {delay:?}"
    );
    let step = h.fire(step.effects.timers[0]);
    assert_eq!(step.effects.launches[0].attempt, 3);

    let step = h.exit(id, 3);
    assert_eq!(step.written(), vec![(id, Failed)]);
    assert_eq!(step.events(), events(&[(id, "failed")]));
    assert!(step.effects.timers.is_empty());
    let attempts: Vec<_> = h.task(id).attempts.iter().map(|a| a.number).collect();
    assert_eq!(attempts, vec![1, 2, 3]);
    let task = h.task(id);
    let last = task.attempts.last().unwrap();
    assert_eq!(last.outcome, Some(AttemptOutcome::Exited { code: 3 }));
    assert_eq!(last.finished_at, Some(h.now));
}

#[test]
fn a_timer_of_a_task_cancelled_meanwhile_is_ignored() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![retrying(1, 100)]);
    let step = h.exit(ids[0], 1);
    let timer = step.effects.timers[0];
    let (step, mut answer) = h.cancel(ids[0]);
    assert_eq!(step.written(), vec![(ids[0], Cancelled)]);
    assert_eq!(answer.value().state.status(), Cancelled);
    assert!(h.fire(timer).is_empty());
    assert_eq!(h.status(ids[0]), Cancelled);
}

#[test]
fn a_start_without_resources_is_deferred_without_using_an_attempt() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![task(), task()]);
    let id = ids[0];
    let reason = "Too many open files".to_string();
    let step = h.report(id, ReportKind::NotStarted(reason));
    assert_eq!(step.written()[0], (id, RetryWaiting));
    assert_eq!(step.events()[0], (id, "start_deferred".to_string()));
    assert!(
        h.task(id).attempts.is_empty(),
        "the attempt that did not start is not kept"
    );
    assert_eq!(armed_delay(&h, &step), START_RETRY_DELAY);
    // Its slot went to the next task in the same step.
    assert_eq!(step.launched(), vec![ids[1]]);
    h.exit(ids[1], 0);
    let step = h.fire(step.effects.timers[0]);
    assert_eq!(step.launched(), vec![id]);
    assert_eq!(
        step.effects.launches[0].attempt, 1,
        "the same attempt, tried again"
    );
}
