//! Which tasks the engine holds in full, and reading the others from the store.
//!
//! The engine holds in full (`tasks`) every task of a workflow and every task that is
//! blocked, running or waiting for a retry, plus any task changed by a step that is not
//! durable yet. A queued task outside a workflow whose record is durable is held as its
//! priority only (`cold`), with its entry in the ready queue; a finished one is not held at
//! all. Memory follows live work, not history.
//!
//! The rule that keeps reads right: a task leaves memory only once the last step that
//! changed it is durable ([`Input::Committed`](crate::engine::Input::Committed)), so the
//! store's record of a task the engine does not hold is always its latest state. The
//! engine reads such records through [`Records`] when it needs one (a cold task to start or
//! cancel, a finished one to retry, the state of a dependency, `orch clean`).

use std::collections::{HashSet, VecDeque};

use orch_protocol::{Task, TaskId, TaskState, TaskStatus};

use super::EngineState;

/// The store's committed task records, as the engine reads them. A read that fails stops
/// the daemon (the implementation's business) and is answered as a missing record.
pub trait Records: Send {
    /// Task `id`'s committed record, if there is one.
    fn task(&self, id: TaskId) -> Option<Task>;

    /// Calls `each` with every committed task in `status`, oldest first.
    fn each_in(&self, status: TaskStatus, each: &mut dyn FnMut(Task));
}

/// What the engine must do once the steps it handed over are durable.
#[derive(Default)]
pub(super) struct Settling {
    /// The number of the last step handed over that changed (or read in) a task.
    last_step: u64,
    /// Each such step, oldest first, with the tasks it touched.
    steps: VecDeque<(u64, Vec<TaskId>)>,
    /// The tasks touched by the step being built.
    touched: Vec<TaskId>,
    /// The last step that touched each task still in `steps`.
    last_touch: std::collections::HashMap<TaskId, u64>,
}

impl EngineState {
    /// What the engine knows of task `id`'s state: from memory when it holds the task (a
    /// queued one by its priority), else the store's committed record.
    pub(super) fn state_of(&self, id: TaskId) -> Option<TaskState> {
        if let Some(task) = self.tasks.get(&id) {
            return Some(task.state.clone());
        }
        if self.cold.contains_key(&id) {
            return Some(TaskState::Queued { since: self.now });
        }
        self.records.task(id).map(|t| t.state)
    }

    /// Holds `id` in full if it is live (held in full already, or queued by its priority
    /// only: then its record is read); false when it is not live.
    pub(super) fn hold_live(&mut self, id: TaskId) -> bool {
        if self.tasks.contains_key(&id) {
            return true;
        }
        if self.cold.remove(&id).is_none() {
            return false;
        }
        self.read_in(id)
    }

    /// Holds `id` in full, reading a finished task's record from the store; false when
    /// there is no such task.
    pub(super) fn hold(&mut self, id: TaskId) -> bool {
        self.hold_live(id) || self.read_in(id)
    }

    /// Reads `id`'s record into memory, until the step being built is durable.
    fn read_in(&mut self, id: TaskId) -> bool {
        let Some(task) = self.records.task(id) else {
            return false;
        };
        self.tasks.insert(id, task);
        self.settling.touched.push(id);
        true
    }

    /// Closes the step being built: the tasks it wrote or read in are let go of once it is
    /// durable. Returns the step's number when there are any.
    pub(super) fn close_step(&mut self) -> Option<u64> {
        let written = self.step.batch.tasks.iter().map(|w| w.task.id);
        let mut touched = std::mem::take(&mut self.settling.touched);
        touched.extend(written);
        if touched.is_empty() {
            return None;
        }
        let settling = &mut self.settling;
        settling.last_step += 1;
        let step = settling.last_step;
        for id in &touched {
            settling.last_touch.insert(*id, step);
        }
        settling.steps.push_back((step, touched));
        Some(step)
    }

    /// Steps up to `step` are durable: every task they touched last is let go of if it
    /// need not be held (queued outside a workflow: held by its priority; finished outside
    /// a workflow: not held).
    ///
    /// A task the step being built has changed or read in already stays held: the store's
    /// record of it is not its latest state yet (that step's commit lets go of it).
    pub(super) fn committed(&mut self, step: u64) {
        let mut done_with = Vec::new();
        while self.settling.steps.front().is_some_and(|(s, _)| *s <= step) {
            let (done, ids) = self.settling.steps.pop_front().expect("checked above");
            for id in ids {
                if self.settling.last_touch.get(&id) == Some(&done) {
                    self.settling.last_touch.remove(&id);
                    done_with.push(id);
                }
            }
        }
        if !done_with.is_empty() {
            let open = self.open_step_tasks();
            for id in done_with {
                if !open.contains(&id) {
                    self.let_go(id);
                }
            }
        }
        self.compact();
    }

    /// The tasks the step being built writes or has read in (its `close_step` registers
    /// them).
    fn open_step_tasks(&self) -> HashSet<TaskId> {
        let written = self.step.batch.tasks.iter().map(|w| w.task.id);
        written
            .chain(self.settling.touched.iter().copied())
            .collect()
    }

    /// Gives back the room of maps that hold far fewer entries than they have room for
    /// (a burst of a million tasks leaves tables sized for a million); notes it, so that
    /// the driver can have the allocator return the pages ([`Self::take_compacted`]).
    fn compact(&mut self) {
        let shrunk = [
            shrink(&mut self.tasks),
            shrink(&mut self.cold),
            shrink(&mut self.dependants),
            shrink(&mut self.running),
            shrink(&mut self.settling.last_touch),
        ];
        self.compacted |= shrunk.contains(&true);
    }

    /// True once after maps were shrunk.
    pub fn take_compacted(&mut self) -> bool {
        std::mem::take(&mut self.compacted)
    }

    /// Stops holding `id` in full when nothing needs it in memory.
    fn let_go(&mut self, id: TaskId) {
        let Some(task) = self.tasks.get(&id) else {
            return;
        };
        if task.spec.workflow.is_some()
            || self.running.contains_key(&id)
            || self.progress_dirty.contains(&id)
            || self.cancel_waiters.contains_key(&id)
        {
            return;
        }
        match task.state.status() {
            TaskStatus::Queued => {
                let priority = task.spec.priority;
                self.tasks.remove(&id);
                self.cold.insert(id, priority);
            }
            // Nothing schedules a stashed task: it is read again when it is changed.
            s if s.is_final() || s == TaskStatus::Stashed => {
                self.tasks.remove(&id);
            }
            _ => {}
        }
    }

    /// How many tasks are held in full, and how many queued ones by priority only.
    pub fn held(&self) -> (usize, usize) {
        (self.tasks.len(), self.cold.len())
    }
}

/// Shrinks `map` to twice its entries when it has room for more than four times as many
/// (and for more than [`SHRINK_FROM`]); true when it did. Each shrink costs one pass over
/// the entries, and follows at least as many removals, so the cost per removal stays
/// constant.
fn shrink<K: Eq + std::hash::Hash, V>(map: &mut std::collections::HashMap<K, V>) -> bool {
    if map.capacity() <= SHRINK_FROM || map.capacity() <= 4 * map.len() {
        return false;
    }
    map.shrink_to(2 * map.len());
    true
}

/// Maps with room for up to this many entries are never shrunk.
const SHRINK_FROM: usize = 16_384;

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::{SHRINK_FROM, shrink};

    #[test]
    fn a_sparse_map_is_shrunk_and_a_full_or_small_one_is_not() {
        let mut map: HashMap<u64, u64> = (0..100_000).map(|i| (i, i)).collect();
        assert!(!shrink(&mut map), "full");
        map.retain(|k, _| *k < 10_000);
        assert!(shrink(&mut map), "a tenth full");
        assert!(map.capacity() < 4 * 10_000 && map.len() == 10_000);
        assert!(!shrink(&mut map), "just shrunk");
        let mut small: HashMap<u64, u64> = (0..(SHRINK_FROM as u64 / 2)).map(|i| (i, i)).collect();
        small.clear();
        assert!(!shrink(&mut small), "small maps keep their room");
    }
}
