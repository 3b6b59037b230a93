//! Answers: given once the batch that makes them true is durable, with the store's error
//! when it is not; submissions are all or none.

use orch_protocol::ErrorKind;

use super::*;
use crate::audit::AuditRecord;

#[test]
fn after_a_failed_commit_successes_carry_its_error_and_refusals_stand() {
    let mut h = Harness::new(1);
    let (accepted, mut accepted_answer) = oneshot::channel();
    let (refused, mut refused_answer) = oneshot::channel();
    let submit = Command::Submit {
        actor: actor(),
        specs: vec![task()],
        stashed: false,
        reply: accepted,
    };
    let cancel = Command::Cancel {
        actor: actor(),
        id: 42,
        reply: refused,
    };
    h.state.handle(Input::Request(submit), h.now);
    h.state.handle(Input::Request(cancel), h.now);
    let mut step = h.state.end_turn(h.now);
    assert_eq!(step.effects.answers.len(), 2);
    assert_eq!(
        step.batch.audit.len(),
        2,
        "both requests are audited in the batch"
    );
    commit(&mut step, Err(&StoreError::Backend("disk full".into())));
    let error = accepted_answer.try_recv().unwrap().unwrap_err();
    assert_eq!(error.kind, ErrorKind::Internal);
    assert!(error.message.contains("disk full"));
    let error = refused_answer.try_recv().unwrap().unwrap_err();
    assert_eq!(error.kind, ErrorKind::NotFound);
}

#[test]
fn a_submission_with_one_bad_task_creates_none() {
    let mut h = Harness::new(1);
    let specs = vec![task(), TaskSpec::command(" ", vec![])];
    let (step, error) = h.submit_refused(specs);
    assert_eq!(error.field.as_deref(), Some("command"));
    assert!(error.message.starts_with("task #1"), "{}", error.message);
    assert!(step.written().is_empty() && step.launched().is_empty());
    assert!(h.state.tasks.is_empty() && h.stored.get(1).is_none());
}

#[test]
fn a_request_handled_outside_the_engine_is_answered_once_its_audit_entry_is_durable() {
    let mut h = Harness::new(1);
    let record = AuditRecord::new(actor(), "shutdown", serde_json::json!({}), Ok("ok".into()));
    let (step, mut answer) = h.ask(|reply| Command::Audit { record, reply });
    assert!(answer.result().is_ok());
    assert_eq!(step.batch.audit.len(), 1);
    assert!(step.written().is_empty() && step.batch.events.is_empty());
}
