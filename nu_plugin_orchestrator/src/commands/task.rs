//! `orch task <id>`: one task in full.

use orch_protocol::Request;

use super::by_id::{ById, task_in_full};

/// `orch task`
pub const TASK: ById = ById {
    name: "orch task",
    description: "Show one task: its settings, state, progress and every attempt.",
    extra_description: "",
    names: "task",
    request: |id| Request::Get { id },
    examples: &[
        ("orch task 42", "Show task 42"),
        (
            "orch task 42 | get attempt_history",
            "Every attempt of task 42, with outcomes and durations",
        ),
    ],
    answer: task_in_full,
};

#[test]
fn test_examples() {
    super::examples::test_examples(&TASK);
}
