//! Test environments: each save of a record is one `env` event in the same batch,
//! carrying its state, under the environment's id; a deleted one's event is final.

use orch_protocol::{DeleteReason, EnvRequest, EnvStage, EnvState, EventKind, TestEnv};

use super::*;

fn new_env(now: DateTime<Utc>) -> TestEnv {
    let request: EnvRequest =
        serde_json::from_value(serde_json::json!({"env": {"type": "single", "taskserv": "redis"}}))
            .expect("a request");
    TestEnv {
        id: 0,
        name: "redis".into(),
        kind: "single".into(),
        request,
        created_at: now,
        expires_at: now,
        network: String::new(),
        nodes: Vec::new(),
        state: EnvState::Starting {
            since: now,
            stage: EnvStage::Creating,
        },
        probes: Vec::new(),
        results: Vec::new(),
        diagnostics: None,
        node: None,
    }
}

#[test]
fn each_save_of_an_environment_is_one_env_event_in_its_batch() {
    let mut h = Harness::new(1);
    let env = new_env(h.now);
    let (step, mut answer) = h.ask(|reply| Command::SaveEnv {
        env: Box::new(env),
        audit: None,
        reply,
    });
    let saved = answer.value();
    assert!(saved.id > 0, "a new environment gets an id");
    assert_eq!(step.batch.test_envs, vec![saved.clone()]);
    let events: Vec<_> = step
        .batch
        .events
        .iter()
        .map(|e| (e.task, &e.kind))
        .collect();
    assert_eq!(
        events,
        vec![(
            saved.id,
            &EventKind::Env {
                state: saved.state.clone()
            }
        )]
    );
    assert!(!step.batch.events[0].kind.is_final());

    let mut deleted = saved.clone();
    deleted.state = EnvState::Deleted {
        at: h.now,
        reason: DeleteReason::Requested,
        failure: None,
    };
    let (step, mut answer) = h.ask(|reply| Command::SaveEnv {
        env: Box::new(deleted),
        audit: None,
        reply,
    });
    assert_eq!(
        answer.value().id,
        saved.id,
        "a saved environment keeps its id"
    );
    assert_eq!(step.batch.events.len(), 1);
    assert_eq!(step.batch.events[0].task, saved.id);
    assert!(step.batch.events[0].kind.is_final(), "its deletion ends it");
    assert_eq!(step.batch.events[0].kind.name(), "env");
}
