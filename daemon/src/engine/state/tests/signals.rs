//! Signals to a running task: audited, sent to the running attempt once durable, the
//! task's state left as it is; refused for a task that is not running or is being
//! stopped, naming why.

use orch_protocol::TaskStatus::Running;
use orch_protocol::{ErrorKind, TaskSignal};

use super::*;

impl Harness {
    fn signal(&mut self, id: TaskId, signal: TaskSignal) -> (Step, Answered<Task>) {
        self.ask(|reply| Command::SignalTask {
            actor: actor(),
            id,
            signal,
            reply,
        })
    }
}

#[test]
fn a_signal_goes_to_the_running_attempt_once_audited_and_changes_no_state() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![retrying(1, 10)]);
    let (step, mut answer) = h.signal(ids[0], TaskSignal::Usr1);
    assert_eq!(answer.value().state.status(), Running);
    assert_eq!(step.effects.signals, vec![(ids[0], 1, TaskSignal::Usr1)]);
    assert!(
        step.written().is_empty(),
        "the task's record is not written"
    );
    assert!(step.events().is_empty());
    let audit = &step.batch.audit;
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].action, "signal");
    assert_eq!(audit[0].params["signal"], "USR1");

    let step = h.exit(ids[0], 3);
    let step = h.fire(step.effects.timers[0]);
    assert_eq!(step.effects.launches[0].attempt, 2);
    let (step, _) = h.signal(ids[0], TaskSignal::Hup);
    assert_eq!(
        step.effects.signals,
        vec![(ids[0], 2, TaskSignal::Hup)],
        "the attempt running now"
    );
}

#[test]
fn a_signal_to_a_task_not_running_or_being_stopped_is_refused_and_audited() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![task(), task()]);
    let (step, mut answer) = h.signal(ids[1], TaskSignal::Term);
    let error = answer.error();
    assert_eq!(
        (error.kind, error.field.as_deref()),
        (ErrorKind::Conflict, Some("id"))
    );
    assert!(error.message.contains("queued"), "{}", error.message);
    assert!(step.effects.signals.is_empty());
    assert_eq!(step.batch.audit.len(), 1, "a refusal is audited too");
    assert_eq!(
        h.signal(99, TaskSignal::Term).1.error().kind,
        ErrorKind::NotFound
    );
    let _waiting = h.cancel(ids[0]);
    let (step, mut answer) = h.signal(ids[0], TaskSignal::Usr1);
    assert!(answer.error().message.contains("being stopped"));
    assert!(step.effects.signals.is_empty());
}
