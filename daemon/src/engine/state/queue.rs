//! The ready queue: higher priority first, submission order within a priority.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use orch_protocol::TaskId;

#[derive(Debug, PartialEq, Eq)]
struct Entry {
    priority: i32,
    id: TaskId,
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.id.cmp(&self.id))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Tasks ready to run. May hold stale entries (a task cancelled or stashed while queued,
/// or queued again at another priority by an edit); the engine checks each popped task's
/// state and priority.
#[derive(Debug, Default)]
pub struct ReadyQueue {
    heap: BinaryHeap<Entry>,
}

impl ReadyQueue {
    /// Adds a ready task.
    pub fn push(&mut self, priority: i32, id: TaskId) {
        self.heap.push(Entry { priority, id });
    }

    /// Makes room for `more` entries.
    pub fn reserve(&mut self, more: usize) {
        self.heap.reserve(more);
    }

    /// How many entries it holds (stale ones included).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True when no task waits in it.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Takes the task that should run next.
    pub fn pop(&mut self) -> Option<TaskId> {
        self.heap.pop().map(|e| e.id)
    }

    /// Takes the task that should run next, with the priority it was queued at.
    pub fn pop_entry(&mut self) -> Option<(i32, TaskId)> {
        self.heap.pop().map(|e| (e.priority, e.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn higher_priority_first_then_fifo() {
        let mut q = ReadyQueue::default();
        for (prio, id) in [(0, 1), (5, 2), (0, 3), (5, 4), (-1, 5)] {
            q.push(prio, id);
        }
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![2, 4, 1, 3, 5]);
    }
}
