//! Signals to a running task's processes (`orch kill --signal`): the request is audited,
//! and the signal goes to the attempt's process group once that is durable. The task's
//! state is left to the task: it ends (or not) as its processes do.

use orch_protocol::{Actor, Task, TaskId, TaskSignal};

use super::{EngineState, Outcome, Reply};

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
        self.step.effects.signals.push((id, attempt, signal));
        let task = self.copy_of(id);
        self.answer(reply, Ok(task));
        Ok(format!("SIG{signal} sent to task {id} (attempt {attempt})"))
    }
}
