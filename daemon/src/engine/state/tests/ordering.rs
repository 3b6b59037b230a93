//! The ready queue and the parallel limit.

use orch_protocol::TaskStatus::{Queued, Running, Succeeded};

use super::*;

#[test]
fn queued_tasks_start_by_priority_then_in_submission_order() {
    let mut h = Harness::new(1);
    let specs = [0, 5, 0, 5, -1].map(with_priority).to_vec();
    let (step, ids) = h.submit(specs);
    assert_eq!(ids, vec![1, 2, 3, 4, 5]);
    // All five are written as queued, then the first of the highest priority runs: its
    // `Running` record is in the same batch as the launch that follows it.
    let mut written: Vec<_> = ids.iter().map(|id| (*id, Queued)).collect();
    written.push((2, Running));
    assert_eq!(step.written(), written);
    assert_eq!(step.launched(), vec![2]);
    assert_eq!(step.effects.launches[0].attempt, 1);
    assert_eq!(
        step.batch.audit.len(),
        1,
        "the submission is audited in the same batch"
    );
    let mut order = vec![2];
    for _ in 0..4 {
        let running = *order.last().unwrap();
        let step = h.exit(running, 0);
        assert_eq!(step.written()[0], (running, Succeeded));
        order.extend(step.launched());
    }
    assert_eq!(order, vec![2, 4, 1, 3, 5]);
}

#[test]
fn the_parallel_limit_bounds_running_attempts() {
    let mut h = Harness::new(2);
    let (step, ids) = h.submit(vec![task(); 5]);
    assert_eq!(step.launched(), vec![1, 2]);
    assert_eq!(h.state.running.len(), 2);
    // Each end frees one slot, taken in the same step.
    let step = h.exit(ids[0], 0);
    assert_eq!(step.launched(), vec![3]);
    let step = h.exit(ids[1], 1);
    assert_eq!(step.launched(), vec![4]);
    assert_eq!(h.status(3), Running);
    assert_eq!(h.status(5), Queued);
    assert_eq!(h.state.running.len(), 2);
}

#[test]
fn a_step_without_changes_commits_nothing() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![task()]);
    let step = h.turn(vec![Input::RetryDue {
        id: ids[0],
        next_attempt: 2,
    }]);
    assert!(
        step.is_empty(),
        "a timer for a task that is not waiting changes nothing"
    );
}
