//! Workflows that run: the per-workflow parallel limit, success, failure, cancel.

use orch_protocol::TaskStatus::{Cancelled, DependencyFailed, Failed, Queued, Running, Succeeded};

use super::*;

#[test]
fn a_workflow_limit_holds_back_ready_steps_until_one_of_its_slots_frees() {
    let mut h = Harness::new(8);
    let steps = [
        ("a", &[][..], false),
        ("b", &[], false),
        ("c", &[], false),
        ("d", &[], false),
    ];
    let (step, summary) = h.submit_workflow(draft(&steps, Some(2), false));
    let wf = summary.id;
    assert_eq!((summary.steps, summary.waves), (4, Some(2)));
    // Each step keeps its wave in the plan: two at a time.
    let waves: Vec<_> = h.workflow(wf).steps.iter().map(|s| s.wave).collect();
    assert_eq!(waves, vec![Some(1), Some(1), Some(2), Some(2)]);
    // The record and its four step tasks are created in one batch.
    assert_eq!(step.workflow_states(), vec![WorkflowStatus::Running]);
    let [a, b, c, d] = ["a", "b", "c", "d"].map(|s| h.step_task(wf, s));
    let mut written: Vec<_> = [a, b, c, d].iter().map(|id| (*id, Queued)).collect();
    written.extend([(a, Running), (b, Running)]);
    assert_eq!(step.written(), written);
    assert_eq!(step.launched(), vec![a, b]);
    assert_eq!(h.state.workflow_running[&wf], 2);
    // Each end releases the held-back steps; one of them takes the freed slot.
    assert_eq!(h.exit(a, 0).launched(), vec![c]);
    assert_eq!(h.status(d), Queued);
    assert_eq!(h.exit(b, 1).launched(), vec![d]);
    assert_eq!(h.state.workflow_running[&wf], 2);
}

#[test]
fn a_workflow_succeeds_in_the_batch_of_its_last_success() {
    let mut h = Harness::new(8);
    let (_, summary) = h.submit_workflow(chain());
    let waves: Vec<_> = h
        .workflow(summary.id)
        .steps
        .iter()
        .map(|s| s.wave)
        .collect();
    assert_eq!(waves, vec![Some(1), Some(2)], "b waits for a");
    let (a, b) = (h.step_task(summary.id, "a"), h.step_task(summary.id, "b"));
    let step = h.exit(a, 0);
    assert_eq!(step.launched(), vec![b]);
    assert!(step.workflow_states().is_empty(), "still running");
    let step = h.exit(b, 0);
    assert_eq!(step.written(), vec![(b, Succeeded)]);
    assert_eq!(step.workflow_states(), vec![WorkflowStatus::Succeeded]);
    assert_eq!(
        step.events(),
        events(&[(b, "succeeded"), (summary.id, "workflow")])
    );
    assert_eq!(
        step.batch.events[0].workflow,
        Some(summary.id),
        "step events name their workflow"
    );
}

#[test]
fn a_failed_step_without_rollback_fails_the_workflow_once_every_branch_ended() {
    let mut h = Harness::new(8);
    let steps = [("a", &[][..], true), ("b", &["a"], true), ("c", &[], true)];
    let (_, summary) = h.submit_workflow(draft(&steps, None, false));
    let wf = summary.id;
    let [a, b, c] = ["a", "b", "c"].map(|s| h.step_task(wf, s));
    let step = h.exit(a, 1);
    assert_eq!(step.written(), vec![(a, Failed), (b, DependencyFailed)]);
    assert!(step.workflow_states().is_empty(), "branch c goes on");
    let step = h.exit(c, 0);
    assert_eq!(step.workflow_states(), vec![WorkflowStatus::Failed]);
    assert!(
        step.launched().is_empty(),
        "no rollback without rollback enabled"
    );
    assert!(
        matches!(&h.workflow(wf).state, WorkflowState::Failed { failed, .. } if failed == &["a", "b"])
    );
}

#[test]
fn cancelling_a_workflow_stops_its_running_steps_and_cancels_the_waiting_ones() {
    let mut h = Harness::new(8);
    let (_, summary) = h.submit_workflow(chain());
    let wf = summary.id;
    let (a, b) = (h.step_task(wf, "a"), h.step_task(wf, "b"));
    let (step, mut answer) = h.ask(|reply| Command::CancelWorkflow {
        actor: actor(),
        id: wf,
        reply,
    });
    assert_eq!(step.effects.stops, vec![a]);
    assert_eq!(step.written(), vec![(b, Cancelled)]);
    assert_eq!(step.workflow_states(), vec![WorkflowStatus::Cancelled]);
    let summary = answer.value();
    assert_eq!(summary.state.status(), WorkflowStatus::Cancelled);
    assert_eq!(
        (summary.step_counts.running, summary.step_counts.cancelled),
        (1, 1)
    );
    let step = h.report(a, signalled());
    assert_eq!(step.written(), vec![(a, Cancelled)]);
    assert!(
        step.workflow_states().is_empty(),
        "a cancelled workflow stays cancelled"
    );
}
