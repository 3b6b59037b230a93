//! Recovery after a restart: interrupted attempts, the queue, timers and ids.

use std::collections::HashSet;

use orch_protocol::TaskStatus::{Cancelled, Failed, Queued, RetryWaiting};

use super::*;
use crate::engine::state::running_attempts;

/// `h`'s committed state, restarted `ms` later.
fn restart(h: &Harness, ms: i64) -> (Harness, Step) {
    let later = h.now + chrono::Duration::milliseconds(ms);
    h.restarted(h.state.nodes.capacity(), later)
}

#[test]
fn an_interrupted_attempt_follows_its_retry_policy() {
    let mut h = Harness::new(2);
    h.submit(vec![retrying(1, 1_000), task()]);
    let seq = h.state.next_seq;
    assert_eq!(running_attempts(&h.snapshot()), vec![(1, 1), (2, 1)]);
    let (mut h, step) = restart(&h, 10_000);
    assert_eq!(step.written(), vec![(1, RetryWaiting), (2, Failed)]);
    assert_eq!(
        step.events(),
        events(&[(1, "attempt_failed"), (2, "failed")])
    );
    assert_eq!(
        step.batch.events[0].seq, seq,
        "the event log goes on where it stopped"
    );
    assert_eq!(step.effects.timers.len(), 1);
    assert_eq!(
        (
            step.effects.timers[0].id,
            step.effects.timers[0].next_attempt
        ),
        (1, 2)
    );
    assert!(
        step.launched().is_empty(),
        "nothing starts before the recovery is durable"
    );
    for id in [1, 2] {
        assert_eq!(
            h.task(id).attempts[0].outcome,
            Some(AttemptOutcome::Interrupted)
        );
    }
    assert!(h.turn(vec![]).launched().is_empty());
}

#[test]
fn an_interrupted_workflow_step_is_queued_again_without_using_a_retry() {
    let mut h = Harness::new(8);
    let (_, summary) = h.submit_workflow(chain());
    let (a, b) = (h.step_task(summary.id, "a"), h.step_task(summary.id, "b"));
    let (mut h, step) = restart(&h, 1_000);
    assert_eq!(step.written(), vec![(a, Queued)]);
    assert!(step.workflow_states().is_empty());
    assert!(step.effects.timers.is_empty());
    assert_eq!(
        h.task(a).attempts_in_round(),
        0,
        "the interrupted attempt is not counted"
    );
    let step = h.turn(vec![]);
    assert_eq!(step.launched(), vec![a]);
    assert_eq!(step.effects.launches[0].attempt, 2);
    assert_eq!(h.exit(a, 0).launched(), vec![b]);
}

#[test]
fn a_step_whose_workflow_was_cancelled_is_cancelled_on_restart() {
    let mut h = Harness::new(8);
    let (_, summary) = h.submit_workflow(draft(&[("a", &[], false)], None, false));
    let a = h.step_task(summary.id, "a");
    h.ask(|reply| Command::CancelWorkflow {
        actor: actor(),
        id: summary.id,
        reply,
    });
    let (mut h, step) = restart(&h, 1_000);
    assert_eq!(step.written(), vec![(a, Cancelled)]);
    assert!(h.turn(vec![]).launched().is_empty());
}

#[test]
fn a_restart_keeps_the_queue_order_the_retry_timers_and_the_ids() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![retrying(1, 60_000)]);
    let timer = h.exit(ids[0], 1).effects.timers[0];
    let (step, _) = h.submit([0, 5, 0].map(with_priority).to_vec());
    assert_eq!(step.launched(), vec![3]);
    let (mut h, step) = restart(&h, 1_000);
    assert_eq!(step.written(), vec![(3, Failed)]);
    assert_eq!(
        step.effects.timers,
        vec![timer],
        "re-armed for the same time"
    );
    assert_eq!(h.turn(vec![]).launched(), vec![2]);
    assert_eq!(h.exit(2, 0).launched(), vec![4]);
    let (_, ids) = h.submit(vec![task()]);
    assert_eq!(ids, vec![5], "ids are never reused");
}

#[test]
fn an_adopted_attempt_stays_running_and_its_outcome_releases_its_dependants() {
    let mut h = Harness::new(1);
    h.submit(vec![task()]);
    h.submit(vec![after(&[1])]);
    let later = h.now + chrono::Duration::milliseconds(1_000);
    let (mut h, step) = h.adopting(1, later, &HashSet::from([1]));
    assert!(
        step.written().is_empty(),
        "nothing to record: {:?}",
        step.written()
    );
    assert_eq!(h.status(1), TaskStatus::Running);
    assert!(h.turn(vec![]).launched().is_empty(), "its slot is taken");
    let step = h.exit(1, 0);
    assert_eq!(step.launched(), vec![2]);
    assert_eq!(h.task(1).attempts.len(), 1);
}

#[test]
fn an_adopted_workflow_step_keeps_its_workflow_slot() {
    let mut h = Harness::new(8);
    let (_, summary) = h.submit_workflow(chain());
    let (a, b) = (h.step_task(summary.id, "a"), h.step_task(summary.id, "b"));
    let later = h.now + chrono::Duration::milliseconds(1_000);
    let (mut h, step) = h.adopting(8, later, &HashSet::from([a]));
    assert!(step.written().is_empty());
    assert_eq!(h.exit(a, 0).launched(), vec![b]);
    assert_eq!(h.task(a).attempts.len(), 1, "the step started once");
}
