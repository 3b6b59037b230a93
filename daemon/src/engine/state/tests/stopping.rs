//! A graceful shutdown: running attempts stopped and requeued without using a retry.

use orch_protocol::TaskStatus::{Cancelled, Queued, Succeeded};

use super::*;

fn shutdown(h: &mut Harness) -> (Step, oneshot::Receiver<()>) {
    let (done, stopped) = oneshot::channel();
    let step = h.turn(vec![Input::Request(Command::Shutdown {
        done,
        leave_running: false,
    })]);
    (step, stopped)
}

#[test]
fn a_shutdown_stops_running_attempts_requeues_them_and_ends_when_none_runs() {
    let mut h = Harness::new(2);
    h.submit(vec![task(); 3]);
    let (step, _stopped) = shutdown(&mut h);
    assert_eq!(step.effects.stops.len(), 2);
    assert!(step.effects.stopped.is_empty() && !h.state.is_stopped());

    let step = h.report(1, signalled());
    assert_eq!(step.written(), vec![(1, Queued)]);
    assert!(step.launched().is_empty(), "nothing starts while stopping");
    let step = h.report(2, signalled());
    assert_eq!(step.written(), vec![(2, Queued)]);
    assert_eq!(step.effects.stopped.len(), 1);
    assert!(h.state.is_stopped());
    for id in [1, 2] {
        let task = h.task(id);
        assert_eq!(task.attempts[0].outcome, Some(AttemptOutcome::Interrupted));
        assert_eq!(task.attempts_in_round(), 0, "a graceful stop uses no retry");
    }
}

#[test]
fn a_cancel_under_way_stays_a_cancel_and_a_success_stays_a_success() {
    let mut h = Harness::new(2);
    h.submit(vec![task(), task()]);
    let (_, mut cancelled) = h.cancel(1);
    shutdown(&mut h);
    h.report(1, signalled());
    assert_eq!(cancelled.value().state.status(), Cancelled);
    let step = h.exit(2, 0);
    assert_eq!(step.written(), vec![(2, Succeeded)]);
    assert!(h.state.is_stopped());
}

#[test]
fn a_shutdown_with_nothing_running_ends_at_once() {
    let mut h = Harness::new(1);
    let (step, _stopped) = shutdown(&mut h);
    assert!(step.effects.stops.is_empty());
    assert_eq!(step.effects.stopped.len(), 1);
    assert!(h.state.is_stopped());
}
