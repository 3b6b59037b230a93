//! `orch cancel <id>`: stop a task.

use orch_protocol::Request;

use super::by_id::{ById, task_as_row};

/// `orch cancel`
pub const CANCEL: ById = ById {
    name: "orch cancel",
    description: "Cancel a task. A running one has its whole process group stopped (SIGTERM, then SIGKILL); tasks that depend on it become dependency_failed.",
    extra_description: "",
    names: "task",
    request: |id| Request::Cancel { id },
    examples: &[
        ("orch cancel 42", "Cancel task 42"),
        (
            "orch cancel 4 5 6",
            "Cancel three tasks (a list of their rows)",
        ),
        (
            "orch tasks --label db --status queued | orch cancel",
            "Cancel every queued task labelled db",
        ),
    ],
    answer: task_as_row,
};

#[test]
fn test_examples() {
    super::examples::test_examples(&CANCEL);
}
