//! Signals to a running task's processes (`orch kill --signal`) and input for its
//! standard input (`orch send`): the request is audited, and the signal or input goes to
//! the running attempt once that is durable. The task's state is left to the task: it
//! ends (or not) as its processes do. The audit entry of an input records its size, not
//! what it says (an answer to a prompt may be a secret).

use orch_protocol::{
    Actor, ErrorKind, ErrorReply, MAX_INPUT_BYTES, Nudge, Task, TaskId, TaskSignal,
};

use super::{EngineState, Outcome, Reply, conflict};

/// What input for a task that is not running can do instead.
const INPUT_HINT: &str = " (input goes to a task while it runs)";

/// What a signal to a task that is not running can do instead.
const SIGNAL_HINT: &str = " (`orch cancel` stops a task that has not started)";

impl EngineState {
    /// Sends `signal` to running task `id`'s processes, once the request is durable.
    pub(super) fn signal_task(
        &mut self,
        actor: Actor,
        id: TaskId,
        signal: TaskSignal,
        reply: Reply<Task>,
    ) {
        let outcome = self.signal_running(id, signal, reply);
        let params = serde_json::json!({ "id": id, "signal": signal });
        self.audit(actor, "signal", params, outcome);
    }

    fn signal_running(&mut self, id: TaskId, signal: TaskSignal, reply: Reply<Task>) -> Outcome {
        if let Err(error) = self.steerable(id, "signalled", SIGNAL_HINT) {
            return self.refuse(reply, error);
        }
        let attempt = self.running[&id].attempt;
        let nudge = Nudge::Signal(signal);
        self.step.effects.nudges.push((id, attempt, nudge));
        let task = self.copy_of(id);
        self.answer(reply, Ok(task));
        Ok(format!("SIG{signal} sent to task {id} (attempt {attempt})"))
    }

    /// Writes `data` to running task `id`'s standard input (closing it after when
    /// `eof`), once the request is durable.
    pub(super) fn send_input(
        &mut self,
        actor: Actor,
        id: TaskId,
        data: String,
        eof: bool,
        reply: Reply<Task>,
    ) {
        let bytes = data.len();
        let outcome = self.input_for_running(id, data, eof, reply);
        let params = serde_json::json!({ "id": id, "bytes": bytes, "eof": eof });
        self.audit(actor, "input", params, outcome);
    }

    fn input_for_running(
        &mut self,
        id: TaskId,
        data: String,
        eof: bool,
        reply: Reply<Task>,
    ) -> Outcome {
        if data.len() > MAX_INPUT_BYTES {
            let error = ErrorReply::field(
                ErrorKind::BadRequest,
                "data",
                format!(
                    "{} bytes of input; at most {MAX_INPUT_BYTES} go at once",
                    data.len()
                ),
            );
            return self.refuse(reply, error);
        }
        if let Err(error) = self.steerable(id, "given input", INPUT_HINT) {
            return self.refuse(reply, error);
        }
        if !self.tasks[&id].spec.stdin {
            let message = format!(
                "task {id} was not submitted with --stdin: its standard input is /dev/null"
            );
            return self.refuse(reply, conflict(message));
        }
        let running = self.running.get_mut(&id).expect("steerable: it runs");
        if running.input_closed {
            let message = format!("task {id}'s standard input was closed (--eof)");
            return self.refuse(reply, conflict(message));
        }
        running.input_closed = eof;
        let attempt = running.attempt;
        let bytes = data.len();
        self.step
            .effects
            .nudges
            .push((id, attempt, Nudge::Input { data, eof }));
        let task = self.copy_of(id);
        self.answer(reply, Ok(task));
        let end = if eof { ", then its end" } else { "" };
        Ok(format!(
            "{bytes} bytes of input for task {id} (attempt {attempt}){end}"
        ))
    }
}
