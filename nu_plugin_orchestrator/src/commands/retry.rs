//! `orch retry <id>`: run a failed or cancelled task again.

use orch_protocol::Request;

use super::by_id::{ById, task_as_row};

/// `orch retry`
pub const RETRY: ById = ById {
    name: "orch retry",
    description: "Queue a failed, cancelled or dependency_failed task again, with a fresh retry budget; tasks that failed because of it wait for it again.",
    extra_description: "",
    names: "task",
    request: |id| Request::Retry { id },
    examples: &[
        (
            "orch retry 42",
            "Run task 42 again with a fresh retry budget",
        ),
        (
            "orch tasks --status failed | orch retry",
            "Run every failed task again",
        ),
    ],
    answer: task_as_row,
};

#[test]
fn test_examples() {
    super::examples::test_examples(&RETRY);
}
