//! An environment's life as typed transitions: each change of its state is one
//! [`Transition`], checked against the state it leaves ([`next`]), so the order (creating
//! → starting → installing → probing → ready; tests from ready or after failed tests;
//! deleting before deleted) is written once, here, and what a request may do in each
//! state too ([`run_refusal`], [`testable`]).

use chrono::{DateTime, Utc};
use orch_protocol::{DeleteReason, EnvId, EnvStage, EnvState, TestEnv};

/// A change of an environment's state.
#[derive(Debug, Clone, PartialEq)]
pub enum Transition {
    /// The next setup stage begins: starting (from creating, or from created when a run
    /// starts it), installing, probing.
    Enter(EnvStage),
    /// Its containers exist and stay stopped (created without `auto_start`).
    Created,
    /// Every node is installed and healthy, or its tests passed.
    Ready,
    /// Its tests begin.
    Testing,
    /// The stage in progress failed with this error.
    Failed(String),
    /// Its removal begins (committed before anything is removed).
    Deleting(DeleteReason),
    /// Its containers and network are gone.
    Deleted,
}

/// A transition the state it would leave does not allow (a bug in the caller).
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("a test environment that is {from} cannot take the transition {transition:?}")]
pub struct InvalidTransition {
    /// The state's name.
    pub from: &'static str,
    /// The transition refused.
    pub transition: Transition,
}

/// The state of a new environment: being created.
pub fn initial(now: DateTime<Utc>) -> EnvState {
    EnvState::Starting {
        since: now,
        stage: EnvStage::Creating,
    }
}

/// The state `transition` leads to from `state` at `now`. A failure fails the stage in
/// progress; a deletion keeps how the environment had failed.
pub fn next(
    state: &EnvState,
    transition: Transition,
    now: DateTime<Utc>,
) -> Result<EnvState, InvalidTransition> {
    let next = match (&transition, state) {
        (Transition::Enter(EnvStage::Starting), EnvState::Created { .. }) => {
            Some(EnvState::Starting {
                since: now,
                stage: EnvStage::Starting,
            })
        }
        (Transition::Enter(to), EnvState::Starting { stage, .. }) if follows(*stage, *to) => {
            Some(EnvState::Starting {
                since: now,
                stage: *to,
            })
        }
        (
            Transition::Created,
            EnvState::Starting {
                stage: EnvStage::Creating,
                ..
            },
        ) => Some(EnvState::Created { at: now }),
        (
            Transition::Ready,
            EnvState::Testing { .. }
            | EnvState::Starting {
                stage: EnvStage::Probing,
                ..
            },
        ) => Some(EnvState::Ready { at: now }),
        (Transition::Testing, _) if testable(state) => Some(EnvState::Testing { since: now }),
        (Transition::Failed(error), EnvState::Starting { stage, .. }) => {
            Some(failed(*stage, error, now))
        }
        (Transition::Failed(error), EnvState::Testing { .. }) => {
            Some(failed(EnvStage::Tests, error, now))
        }
        (Transition::Deleting(reason), _) if !matches!(state, EnvState::Deleted { .. }) => {
            Some(EnvState::Deleting {
                since: now,
                reason: *reason,
                failure: state.failure(),
            })
        }
        (
            Transition::Deleted,
            EnvState::Deleting {
                reason, failure, ..
            },
        ) => Some(EnvState::Deleted {
            at: now,
            reason: *reason,
            failure: failure.clone(),
        }),
        _ => None,
    };
    next.ok_or(InvalidTransition {
        from: state.status(),
        transition,
    })
}

/// Whether setup stage `to` comes right after `from`.
fn follows(from: EnvStage, to: EnvStage) -> bool {
    use EnvStage::{Creating, Installing, Probing, Starting};
    matches!(
        (from, to),
        (Creating, Starting) | (Starting, Installing) | (Installing, Probing)
    )
}

/// Moves `env` on by `transition`, now; unchanged when its state does not allow it.
pub fn apply(env: &mut TestEnv, transition: Transition) -> Result<(), InvalidTransition> {
    env.state = next(&env.state, transition, Utc::now())?;
    Ok(())
}

fn failed(stage: EnvStage, error: &str, now: DateTime<Utc>) -> EnvState {
    EnvState::Failed {
        at: now,
        stage,
        error: error.to_string(),
    }
}

/// Whether tests may run in `state`: ready, or again after failed tests (a setup that
/// failed keeps its error and diagnostics).
pub fn testable(state: &EnvState) -> bool {
    match state {
        EnvState::Ready { .. } => true,
        EnvState::Failed { stage, .. } => *stage == EnvStage::Tests,
        _ => false,
    }
}

/// Why environment `id` in `state` cannot be run (started if needed, then tested), or
/// `None` when it can (unless it is busy).
pub fn run_refusal(id: EnvId, state: &EnvState) -> Option<String> {
    match state {
        EnvState::Deleted { .. } => Some(format!("test environment {id} is deleted")),
        EnvState::Deleting { .. } => Some(format!("test environment {id} is being deleted")),
        EnvState::Failed { stage, .. } if *stage != EnvStage::Tests => Some(format!(
            "test environment {id} failed while {stage}: delete it and create another"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        Utc::now()
    }

    /// Applies `transitions` in turn from a new environment; the last state.
    fn through(transitions: Vec<Transition>) -> Result<EnvState, InvalidTransition> {
        transitions
            .into_iter()
            .try_fold(initial(now()), |state, t| next(&state, t, now()))
    }

    fn setup() -> Vec<Transition> {
        vec![
            Transition::Enter(EnvStage::Starting),
            Transition::Enter(EnvStage::Installing),
            Transition::Enter(EnvStage::Probing),
            Transition::Ready,
        ]
    }

    #[test]
    fn setup_goes_through_its_stages_in_order() {
        assert!(matches!(through(setup()), Ok(EnvState::Ready { .. })));
        let skipped = through(vec![Transition::Enter(EnvStage::Installing)]);
        assert_eq!(
            skipped,
            Err(InvalidTransition {
                from: "starting",
                transition: Transition::Enter(EnvStage::Installing)
            })
        );
        assert!(
            through(vec![Transition::Ready]).is_err(),
            "not before probing"
        );
        assert!(through(vec![Transition::Enter(EnvStage::Tests)]).is_err());
    }

    #[test]
    fn a_created_environment_starts_when_it_is_run() {
        let mut steps = vec![Transition::Created];
        steps.extend(setup());
        assert!(matches!(through(steps), Ok(EnvState::Ready { .. })));
        let created_late = through(vec![
            Transition::Enter(EnvStage::Starting),
            Transition::Created,
        ]);
        assert!(created_late.is_err(), "created only while creating");
    }

    #[test]
    fn a_failure_fails_the_stage_in_progress() {
        let failing = |before: Vec<Transition>| {
            let mut steps = before;
            steps.push(Transition::Failed("boom".into()));
            match through(steps) {
                Ok(EnvState::Failed { stage, error, .. }) => (stage, error),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(failing(vec![]).0, EnvStage::Creating);
        let installing = setup()[..2].to_vec();
        assert_eq!(failing(installing), (EnvStage::Installing, "boom".into()));
        let mut testing = setup();
        testing.push(Transition::Testing);
        assert_eq!(failing(testing).0, EnvStage::Tests);
        assert!(through(vec![Transition::Created, Transition::Failed("x".into())]).is_err());
    }

    #[test]
    fn tests_run_when_ready_or_again_after_failed_tests_only() {
        let mut steps = setup();
        steps.extend([
            Transition::Testing,
            Transition::Failed("1 of 1 tests failed".into()),
            Transition::Testing,
            Transition::Ready,
        ]);
        assert!(matches!(through(steps), Ok(EnvState::Ready { .. })));
        let install_failed = vec![
            Transition::Enter(EnvStage::Starting),
            Transition::Enter(EnvStage::Installing),
            Transition::Failed("no".into()),
        ];
        let state = through(install_failed.clone()).unwrap();
        assert!(!testable(&state));
        let mut steps = install_failed;
        steps.push(Transition::Testing);
        assert!(through(steps).is_err());
    }

    #[test]
    fn a_deletion_keeps_the_failure_and_the_reason() {
        let steps = vec![
            Transition::Failed("no network".into()),
            Transition::Deleting(DeleteReason::AutoCleanup),
            Transition::Deleted,
        ];
        match through(steps) {
            Ok(EnvState::Deleted {
                reason, failure, ..
            }) => {
                assert_eq!(reason, DeleteReason::AutoCleanup);
                assert_eq!(
                    failure.as_deref(),
                    Some("failed while creating: no network")
                );
            }
            other => panic!("{other:?}"),
        }
        let again = vec![
            Transition::Deleting(DeleteReason::Requested),
            Transition::Deleting(DeleteReason::Requested),
            Transition::Deleted,
        ];
        assert!(
            matches!(through(again.clone()), Ok(EnvState::Deleted { .. })),
            "a restart finishes it"
        );
        let mut twice = again;
        twice.push(Transition::Deleting(DeleteReason::Expired));
        assert!(through(twice).is_err(), "deleted is final");
        assert!(
            through(vec![Transition::Deleted]).is_err(),
            "deleting first"
        );
    }

    #[test]
    fn runs_are_refused_on_deleted_deleting_and_failed_setups() {
        let at = now();
        let reason = DeleteReason::Requested;
        let refused = [
            EnvState::Deleted {
                at,
                reason,
                failure: None,
            },
            EnvState::Deleting {
                since: at,
                reason,
                failure: None,
            },
            failed(EnvStage::Probing, "x", at),
        ];
        let messages: Vec<String> = refused.iter().filter_map(|s| run_refusal(3, s)).collect();
        assert_eq!(
            messages,
            [
                "test environment 3 is deleted",
                "test environment 3 is being deleted",
                "test environment 3 failed while probing: delete it and create another"
            ]
        );
        assert_eq!(run_refusal(3, &failed(EnvStage::Tests, "x", at)), None);
        assert_eq!(run_refusal(3, &EnvState::Created { at }), None);
    }
}
