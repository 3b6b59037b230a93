//! Signals and input for a running task: audited, sent to the running attempt once
//! durable, the task's state left as it is; refused for a task that is not running or
//! is being stopped, naming why; input only for a task submitted with `stdin`, until its
//! end, within the size limit, audited by size.

use orch_protocol::TaskStatus::Running;
use orch_protocol::{ErrorKind, MAX_INPUT_BYTES, Nudge, TaskSignal};

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

    fn input(&mut self, id: TaskId, data: &str, eof: bool) -> (Step, Answered<Task>) {
        self.ask(|reply| Command::SendInput {
            actor: actor(),
            id,
            data: data.to_string(),
            eof,
            reply,
        })
    }
}

/// A task whose standard input is a pipe.
fn reading() -> TaskSpec {
    TaskSpec {
        stdin: true,
        ..task()
    }
}

#[test]
fn a_signal_goes_to_the_running_attempt_once_audited_and_changes_no_state() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![retrying(1, 10)]);
    let (step, mut answer) = h.signal(ids[0], TaskSignal::Usr1);
    assert_eq!(answer.value().state.status(), Running);
    assert_eq!(
        step.effects.nudges,
        vec![(ids[0], 1, Nudge::Signal(TaskSignal::Usr1))]
    );
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
        step.effects.nudges,
        vec![(ids[0], 2, Nudge::Signal(TaskSignal::Hup))],
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
    assert!(step.effects.nudges.is_empty());
    assert_eq!(step.batch.audit.len(), 1, "a refusal is audited too");
    assert_eq!(
        h.signal(99, TaskSignal::Term).1.error().kind,
        ErrorKind::NotFound
    );
    let _waiting = h.cancel(ids[0]);
    let (step, mut answer) = h.signal(ids[0], TaskSignal::Usr1);
    assert!(answer.error().message.contains("being stopped"));
    assert!(step.effects.nudges.is_empty());
}

#[test]
fn input_goes_to_a_reading_task_until_its_end_and_is_audited_by_size() {
    let mut h = Harness::new(2);
    let (_, ids) = h.submit(vec![reading(), task()]);
    let (step, mut answer) = h.input(ids[0], "yes\n", false);
    answer.value();
    let input = |data: &str, eof| Nudge::Input {
        data: data.to_string(),
        eof,
    };
    assert_eq!(
        step.effects.nudges,
        vec![(ids[0], 1, input("yes\n", false))]
    );
    let audit = &step.batch.audit[0];
    assert_eq!(audit.action, "input");
    assert_eq!(
        audit.params,
        serde_json::json!({"id": ids[0], "bytes": 4, "eof": false})
    );
    assert!(
        !audit.params.to_string().contains("yes"),
        "not what it says"
    );
    let (step, mut answer) = h.input(ids[0], "", true);
    answer.value();
    assert_eq!(step.effects.nudges, vec![(ids[0], 1, input("", true))]);

    let (step, mut answer) = h.input(ids[0], "late\n", false);
    assert!(answer.error().message.contains("closed (--eof)"));
    assert!(step.effects.nudges.is_empty());
    let error = h.input(ids[1], "x", false).1.error();
    assert_eq!(error.kind, ErrorKind::Conflict);
    assert!(
        error.message.contains("not submitted with --stdin"),
        "{}",
        error.message
    );
    let big = "x".repeat(MAX_INPUT_BYTES + 1);
    let error = h.input(ids[0], &big, false).1.error();
    assert_eq!(
        (error.kind, error.field.as_deref()),
        (ErrorKind::BadRequest, Some("data"))
    );
    let (_, waiting) = h.submit(vec![reading()]);
    let error = h.input(waiting[0], "x", false).1.error();
    assert!(
        error.message.contains("only a running task is given input"),
        "{}",
        error.message
    );
}
