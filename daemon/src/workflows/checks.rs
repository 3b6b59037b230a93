//! What is checked of a workflow around its expansion: its size, counted from the
//! request before any step is built (so a request never makes the daemon build more than
//! [`MAX_STEPS`] steps), and the draft once it is built.

use orch_protocol::{BatchWorkflow, TaskservInfo};

use super::{Draft, ExpandError};

/// The most steps one workflow may have.
pub const MAX_STEPS: usize = 100_000;

/// Refuses `what` when it would have more than [`MAX_STEPS`] steps (`count` none: more
/// than can be counted).
pub fn step_count(what: &str, count: Option<usize>) -> Result<(), ExpandError> {
    match count {
        Some(n) if n <= MAX_STEPS => Ok(()),
        count => Err(ExpandError::TooManySteps {
            what: what.to_string(),
            count,
        }),
    }
}

/// The steps of creating servers with the taskservs of their install orders: one
/// creation per server and one install per taskserv.
pub fn created_servers(orders: &[Vec<&TaskservInfo>]) -> Option<usize> {
    orders
        .iter()
        .try_fold(0usize, |n, order| n.checked_add(1 + order.len()))
}

/// Refuses a batch definition without a name or operations, or with more operations than
/// steps a workflow may have (each operation is one step).
pub fn batch(workflow: &BatchWorkflow) -> Result<(), ExpandError> {
    if workflow.name.trim().is_empty() {
        return Err(ExpandError::Invalid("`name` is empty".into()));
    }
    if workflow.operations.is_empty() {
        return Err(ExpandError::Invalid(format!(
            "workflow `{}` has no operations",
            workflow.name
        )));
    }
    step_count(
        &format!("workflow `{}`", workflow.name),
        Some(workflow.operations.len()),
    )
}

/// Refuses a built draft without steps, with more than [`MAX_STEPS`] (a last check: each
/// kind counts its steps before building them), or with a parallel limit of 0.
pub fn draft(draft: &Draft) -> Result<(), ExpandError> {
    step_count(
        &format!("workflow `{}`", draft.name),
        Some(draft.steps.len()),
    )?;
    if draft.steps.is_empty() {
        return Err(ExpandError::Invalid(format!(
            "workflow `{}` has no steps",
            draft.name
        )));
    }
    if draft.parallel_limit == Some(0) {
        return Err(ExpandError::Invalid(
            "`parallel_limit` must be at least 1".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_refused_past_the_limit_and_when_they_overflow() {
        assert_eq!(step_count("w", Some(MAX_STEPS)), Ok(()));
        assert_eq!(
            step_count("w", Some(MAX_STEPS + 1))
                .unwrap_err()
                .to_string(),
            "w would have 100001 steps; the limit is 100000"
        );
        assert_eq!(
            step_count("w", None).unwrap_err().to_string(),
            "w would have more than 100000 steps"
        );
        assert_eq!(created_servers(&[vec![], vec![]]), Some(2));
    }
}
