//! `orch stash <id>...`: hold tasks that have not started until they are enqueued.

use orch_protocol::{Request, TaskChange};

use super::by_id::{ById, task_as_row};

/// `orch stash`
pub const STASH: ById = ById {
    name: "orch stash",
    description: "Hold queued, blocked or delayed tasks: they are `stashed` and start only once `orch enqueue` releases them.",
    extra_description: "A stashed task keeps its settings and dependencies, and can be edited (`orch edit`) or cancelled; tasks that depend on it wait for it. `orch submit --stash` submits a task stashed.",
    names: "task",
    request: |id| Request::ChangeTask {
        id,
        change: TaskChange::Stash,
    },
    examples: &[
        ("orch stash 42", "Hold task 42 until it is enqueued"),
        (
            "orch tasks --status queued --label nightly | orch stash",
            "Hold every queued nightly task",
        ),
    ],
    answer: task_as_row,
};

#[test]
fn test_examples() {
    super::examples::test_examples(&STASH);
}
