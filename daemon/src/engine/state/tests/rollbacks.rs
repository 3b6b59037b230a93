//! Rollbacks: compensations in reverse dependency order, after the running steps
//! stopped, and rounds that compensate what is still not compensated.

use orch_protocol::ErrorKind;
use orch_protocol::TaskStatus::{Blocked, Cancelled, Failed, Queued, Running};
use orch_protocol::WorkflowStatus::{RollbackFailed, RolledBack, RollingBack};

use super::*;

/// Runs the workflow's steps `succeed` (in order, each must be running) to success.
fn succeed(h: &mut Harness, wf: WorkflowId, steps: &[&str]) {
    for step in steps {
        let id = h.step_task(wf, step);
        h.exit(id, 0);
    }
}

fn rollback(h: &mut Harness, wf: WorkflowId) -> (Step, Answered<WorkflowSummary>) {
    h.ask(|reply| Command::RollbackWorkflow {
        actor: actor(),
        id: wf,
        reply,
    })
}

#[test]
fn compensations_run_in_reverse_dependency_order_through_uncompensated_steps() {
    let mut h = Harness::new(8);
    // b has no compensation; d fails.
    let steps = [
        ("a", &[][..], true),
        ("b", &["a"], false),
        ("c", &["b"], true),
        ("d", &["c"], true),
    ];
    let (_, summary) = h.submit_workflow(draft(&steps, None, true));
    let wf = summary.id;
    succeed(&mut h, wf, &["a", "b", "c"]);
    let d = h.step_task(wf, "d");
    let step = h.exit(d, 1);
    let (comp_c, comp_a) = (h.compensation(wf, "c", 1), h.compensation(wf, "a", 1));
    // In the failure's batch: the rollback's state, then its compensations (c's first,
    // a's waiting for c's), then the start of c's.
    assert_eq!(
        step.written(),
        vec![
            (d, Failed),
            (comp_c, Queued),
            (comp_a, Blocked),
            (comp_c, Running)
        ]
    );
    assert_eq!(step.workflow_states(), vec![RollingBack, RollingBack]);
    assert_eq!(step.launched(), vec![comp_c]);
    assert_eq!(h.task(comp_a).spec.after, vec![comp_c]);
    assert!(h.task(comp_a).spec.workflow.as_ref().unwrap().rollback);
    assert!(matches!(
        h.workflow(wf).state,
        WorkflowState::RollingBack {
            started: true,
            round: 1,
            ..
        }
    ));

    let step = h.exit(comp_c, 0);
    assert_eq!(step.launched(), vec![comp_a]);
    assert!(step.workflow_states().is_empty());
    let step = h.exit(comp_a, 0);
    assert_eq!(step.workflow_states(), vec![RolledBack]);
}

#[test]
fn a_rollback_waits_until_the_running_steps_have_stopped() {
    let mut h = Harness::new(8);
    let steps = [("a", &[][..], true), ("b", &[], true), ("c", &["a"], true)];
    let (_, summary) = h.submit_workflow(draft(&steps, None, true));
    let wf = summary.id;
    let [a, b, c] = ["a", "b", "c"].map(|s| h.step_task(wf, s));
    h.exit(a, 0);
    let step = h.exit(c, 1);
    assert_eq!(step.effects.stops, vec![b]);
    assert_eq!(step.workflow_states(), vec![RollingBack]);
    assert!(
        h.workflow(wf).rollback_steps.is_empty(),
        "nothing compensated while b runs"
    );
    let step = h.report(b, signalled());
    let comp_a = h.compensation(wf, "a", 1);
    assert_eq!(
        step.written(),
        vec![(b, Cancelled), (comp_a, Queued), (comp_a, Running)]
    );
    assert_eq!(
        h.workflow(wf).rollback_steps.len(),
        1,
        "only completed steps are compensated"
    );
}

#[test]
fn a_failed_compensation_ends_in_rollback_failed_and_the_next_round_does_the_rest() {
    let mut h = Harness::new(8);
    let steps = [
        ("a", &[][..], true),
        ("b", &["a"], true),
        ("c", &["b"], true),
    ];
    let (_, summary) = h.submit_workflow(draft(&steps, None, true));
    let wf = summary.id;
    succeed(&mut h, wf, &["a", "b"]);
    h.exit(h.step_task(wf, "c"), 1);
    h.exit(h.compensation(wf, "b", 1), 0);
    let step = h.exit(h.compensation(wf, "a", 1), 1);
    assert_eq!(step.workflow_states(), vec![RollbackFailed]);
    assert!(
        matches!(&h.workflow(wf).state, WorkflowState::RollbackFailed { failed, .. } if failed == &["a"])
    );

    // Round 2 compensates only a: b's compensation succeeded in round 1.
    let (step, mut answer) = rollback(&mut h, wf);
    let comp_a = h.compensation(wf, "a", 2);
    assert_eq!(step.launched(), vec![comp_a]);
    assert_eq!(h.workflow(wf).rollback_steps.len(), 3);
    let summary = answer.value();
    assert_eq!(
        (summary.state.status(), summary.compensations),
        (RollingBack, 3)
    );
    assert_eq!(h.exit(comp_a, 0).workflow_states(), vec![RolledBack]);

    let (step, mut answer) = rollback(&mut h, wf);
    assert_eq!(answer.error().kind, ErrorKind::Conflict);
    assert!(step.workflow_states().is_empty() && step.written().is_empty());
}
