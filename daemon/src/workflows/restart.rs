//! Restarting a finished workflow from one of its steps (the dashboard's "restart from
//! this step", `orch workflow restart`): a new workflow of that step and of every step
//! that depends on it, hard or soft, transitively. The steps before it are taken as done:
//! each hard dependency left out must have succeeded in the finished run, and the new
//! workflow's steps keep only the dependencies among themselves.
//!
//! The new steps run the stored tasks' specs again (the commands, parameters and
//! compensations the first run had); the engine gives them their new workflow's id. Only
//! a workflow that is over and whose completed steps still stand may be restarted: one
//! that runs or rolls back is not over, and one rolled back (or partly) had the work its
//! earlier steps did undone.

use std::collections::{HashMap, HashSet};

use orch_protocol::{TaskId, TaskSpec, TaskStatus, Workflow, WorkflowId, WorkflowStatus};
use serde_json::json;

use super::{Draft, DraftStep};

/// Why a workflow cannot be restarted from a step. Each names the workflow or the step.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestartError {
    /// It is running or rolling back.
    #[error("workflow {id} is {}: only a finished workflow can be restarted (cancel it first, or retry its failed step)", .status.as_str())]
    NotFinished {
        /// The workflow.
        id: WorkflowId,
        /// Its status.
        status: WorkflowStatus,
    },
    /// Its completed steps were compensated: what they did is gone.
    #[error("workflow {id} is {}: its completed steps were undone, so no step can start from them; submit the workflow again", .status.as_str())]
    RolledBack {
        /// The workflow.
        id: WorkflowId,
        /// Its status.
        status: WorkflowStatus,
    },
    /// No step has that id.
    #[error("workflow {id} has no step `{step}`")]
    NoSuchStep {
        /// The workflow.
        id: WorkflowId,
        /// The id asked for.
        step: String,
    },
    /// A step the restart needs was removed (`orch clean`, retention).
    #[error(
        "step `{step}` of workflow {id} was removed (task {task}): the workflow cannot be restarted from `{from}`"
    )]
    Removed {
        /// The workflow.
        id: WorkflowId,
        /// The step to start from.
        from: String,
        /// The removed step.
        step: String,
        /// Its task.
        task: TaskId,
    },
    /// A step before the restarted ones did not succeed, so starting after it would run
    /// on work that was never done.
    #[error("step `{dependency}` ({}), which step `{step}` needs, did not succeed: restart from `{dependency}` instead", .status.map_or("removed", TaskStatus::as_str))]
    DependencyNotDone {
        /// The restarted step that needs it.
        step: String,
        /// The dependency left out.
        dependency: String,
        /// Its status (none: removed).
        status: Option<TaskStatus>,
    },
}

/// What a restart reads of the finished run: the workflow, the specs of its steps' tasks
/// and their statuses (a removed task has neither).
pub struct FinishedRun<'a> {
    /// The workflow.
    pub workflow: &'a Workflow,
    /// Each step task's spec, by task id.
    pub specs: &'a HashMap<TaskId, TaskSpec>,
    /// Each step task's status, by task id.
    pub statuses: &'a HashMap<TaskId, TaskStatus>,
}

/// The ids of the steps a restart from `from` runs again, dependencies first: `from` and
/// every step that depends on one of them.
pub fn restarted_steps(workflow: &Workflow, from: &str) -> Option<Vec<String>> {
    let mut chosen: HashSet<&str> = HashSet::new();
    // Stored steps are in dependency order, so one pass finds every dependant.
    for step in &workflow.steps {
        let depends = step
            .dependencies
            .iter()
            .chain(&step.soft_dependencies)
            .any(|d| chosen.contains(d.as_str()));
        if step.id == from || depends {
            chosen.insert(step.id.as_str());
        }
    }
    (!chosen.is_empty()).then(|| {
        let steps = workflow.steps.iter().map(|s| &s.id);
        steps
            .filter(|id| chosen.contains(id.as_str()))
            .cloned()
            .collect()
    })
}

/// The draft of the new workflow: the finished run's steps from `from` on.
pub fn draft(run: &FinishedRun<'_>, from: &str) -> Result<Draft, RestartError> {
    let workflow = run.workflow;
    let id = workflow.id;
    let status = workflow.state.status();
    match status {
        WorkflowStatus::Running | WorkflowStatus::RollingBack => {
            return Err(RestartError::NotFinished { id, status });
        }
        WorkflowStatus::RolledBack | WorkflowStatus::RollbackFailed => {
            return Err(RestartError::RolledBack { id, status });
        }
        WorkflowStatus::Succeeded | WorkflowStatus::Failed | WorkflowStatus::Cancelled => {}
    }
    let chosen = restarted_steps(workflow, from).ok_or_else(|| RestartError::NoSuchStep {
        id,
        step: from.to_string(),
    })?;
    let chosen_set: HashSet<&str> = chosen.iter().map(String::as_str).collect();
    let by_id: HashMap<&str, &orch_protocol::WorkflowStep> =
        workflow.steps.iter().map(|s| (s.id.as_str(), s)).collect();
    let mut steps = Vec::with_capacity(chosen.len());
    for name in &chosen {
        let step = by_id[name.as_str()];
        for dependency in &step.dependencies {
            if chosen_set.contains(dependency.as_str()) {
                continue;
            }
            let status = by_id
                .get(dependency.as_str())
                .and_then(|d| run.statuses.get(&d.task).copied());
            if status != Some(TaskStatus::Succeeded) {
                return Err(RestartError::DependencyNotDone {
                    step: step.id.clone(),
                    dependency: dependency.clone(),
                    status,
                });
            }
        }
        let spec = run
            .specs
            .get(&step.task)
            .ok_or_else(|| RestartError::Removed {
                id,
                from: from.to_string(),
                step: step.id.clone(),
                task: step.task,
            })?;
        let within = |ids: &[String]| -> Vec<String> {
            let kept = ids.iter().filter(|d| chosen_set.contains(d.as_str()));
            kept.cloned().collect()
        };
        steps.push(DraftStep {
            id: step.id.clone(),
            description: step.description.clone(),
            spec: fresh(spec),
            dependencies: within(&step.dependencies),
            soft_dependencies: within(&step.soft_dependencies),
            rollback: step.rollback.as_ref().map(fresh),
            fill_workflow_id: carries_workflow_id(spec, id),
        });
    }
    Ok(Draft {
        name: workflow.name.clone(),
        kind: workflow.kind,
        request: json!({
            "restart_of": id,
            "from_step": from,
            "steps": chosen,
            "request": workflow.request,
        }),
        priority: workflow.priority,
        parallel_limit: workflow.parallel_limit,
        group: None,
        rollback_enabled: workflow.rollback_enabled,
        steps,
        restart_of: Some(id),
    })
}

/// A stored step's spec without what its first run's workflow gave it (the engine gives
/// the new workflow's).
fn fresh(spec: &TaskSpec) -> TaskSpec {
    let mut spec = spec.clone();
    spec.after.clear();
    spec.soft_after.clear();
    spec.workflow = None;
    spec.env.remove("ORCH_WORKFLOW_ID");
    spec.env.remove("ORCH_STEP");
    spec
}

/// Whether the engine wrote workflow `id` into the step's context (`$params.workflow`):
/// the restarted step gets its new workflow's id there instead.
fn carries_workflow_id(spec: &TaskSpec, id: WorkflowId) -> bool {
    spec.params.get("workflow").and_then(|v| v.as_u64()) == Some(id)
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use orch_protocol::{WorkflowKind, WorkflowState, WorkflowStep};

    use super::*;

    fn spec(program: &str) -> TaskSpec {
        TaskSpec::command(program, vec![])
    }

    /// a → b → d, a → c, and e on its own; b's soft dependant f.
    fn workflow(state: WorkflowState) -> Workflow {
        let step = |id: &str, task, hard: &[&str], soft: &[&str]| WorkflowStep {
            id: id.into(),
            description: format!("step {id}"),
            task,
            dependencies: hard.iter().map(|s| s.to_string()).collect(),
            soft_dependencies: soft.iter().map(|s| s.to_string()).collect(),
            rollback: (id == "b").then(|| spec("undo-b")),
            wave: None,
        };
        Workflow {
            id: 10,
            name: "deploy".into(),
            kind: WorkflowKind::Batch,
            request: json!({"kind": "batch"}),
            submitted_at: Utc::now(),
            priority: 3,
            parallel_limit: Some(2),
            rollback_enabled: true,
            steps: vec![
                step("a", 11, &[], &[]),
                step("e", 12, &[], &[]),
                step("b", 13, &["a"], &[]),
                step("c", 14, &["a"], &[]),
                step("d", 15, &["b"], &[]),
                step("f", 16, &[], &["b"]),
            ],
            rollback_steps: vec![],
            state,
            last_event: 0,
            waves: None,
        }
    }

    fn failed() -> WorkflowState {
        WorkflowState::Failed {
            finished_at: Utc::now(),
            failed: vec!["b".into()],
        }
    }

    fn specs() -> HashMap<TaskId, TaskSpec> {
        (11..=16)
            .map(|task| {
                let mut spec = spec(&format!("run-{task}"));
                spec.after = vec![1];
                spec.env.insert("ORCH_WORKFLOW_ID".into(), "10".into());
                spec.env.insert("KEEP".into(), "yes".into());
                if task == 15 {
                    spec.params = json!({"workflow": 10, "server": "web"});
                }
                (task, spec)
            })
            .collect()
    }

    fn statuses(b: TaskStatus) -> HashMap<TaskId, TaskStatus> {
        let mut statuses: HashMap<TaskId, TaskStatus> =
            (11..=16).map(|t| (t, TaskStatus::Succeeded)).collect();
        statuses.insert(13, b);
        statuses.insert(15, TaskStatus::DependencyFailed);
        statuses
    }

    #[test]
    fn a_restart_takes_the_step_and_everything_after_it() {
        let workflow = workflow(failed());
        let (specs, statuses) = (specs(), statuses(TaskStatus::Failed));
        let run = FinishedRun {
            workflow: &workflow,
            specs: &specs,
            statuses: &statuses,
        };
        let draft = draft(&run, "b").unwrap();
        let ids: Vec<&str> = draft.steps.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["b", "d", "f"]);
        let b = &draft.steps[0];
        assert!(b.dependencies.is_empty(), "a is taken as done");
        assert_eq!(b.spec.after, Vec::<TaskId>::new());
        assert!(!b.spec.env.contains_key("ORCH_WORKFLOW_ID"));
        assert_eq!(b.spec.env["KEEP"], "yes");
        assert!(b.rollback.is_some(), "the compensation comes along");
        assert_eq!(draft.steps[1].dependencies, ["b"]);
        assert_eq!(draft.steps[2].soft_dependencies, ["b"]);
        assert!(
            draft.steps[1].fill_workflow_id,
            "d had its workflow's id filled in"
        );
        assert!(!b.fill_workflow_id);
        assert_eq!(draft.restart_of, Some(10));
        assert_eq!(draft.request["restart_of"], 10);
        assert_eq!(draft.request["steps"], json!(["b", "d", "f"]));
        assert_eq!((draft.priority, draft.parallel_limit), (3, Some(2)));
    }

    #[test]
    fn a_left_out_dependency_must_have_succeeded() {
        let workflow = workflow(failed());
        let (specs, statuses) = (specs(), statuses(TaskStatus::Failed));
        let run = FinishedRun {
            workflow: &workflow,
            specs: &specs,
            statuses: &statuses,
        };
        let error = draft(&run, "d").unwrap_err();
        assert_eq!(
            error,
            RestartError::DependencyNotDone {
                step: "d".into(),
                dependency: "b".into(),
                status: Some(TaskStatus::Failed),
            }
        );
        assert!(
            error.to_string().contains("restart from `b` instead"),
            "{error}"
        );
        // From the root, everything depending on it runs again; e stays out.
        let ids: Vec<String> = draft(&run, "a")
            .unwrap()
            .steps
            .into_iter()
            .map(|s| s.id)
            .collect();
        assert_eq!(ids, ["a", "b", "c", "d", "f"]);
    }

    #[test]
    fn only_a_finished_workflow_whose_work_stands_restarts() {
        let (specs, statuses) = (specs(), statuses(TaskStatus::Failed));
        let states = [
            WorkflowState::Running { since: Utc::now() },
            WorkflowState::RolledBack {
                finished_at: Utc::now(),
                reason: "b failed".into(),
            },
        ];
        for state in states {
            let workflow = workflow(state);
            let run = FinishedRun {
                workflow: &workflow,
                specs: &specs,
                statuses: &statuses,
            };
            let error = draft(&run, "b").unwrap_err();
            assert!(
                matches!(
                    error,
                    RestartError::NotFinished { .. } | RestartError::RolledBack { .. }
                ),
                "{error}"
            );
        }
        let workflow = workflow(failed());
        let run = FinishedRun {
            workflow: &workflow,
            specs: &specs,
            statuses: &statuses,
        };
        let error = draft(&run, "nope").unwrap_err();
        assert_eq!(error.to_string(), "workflow 10 has no step `nope`");
        let mut specs = specs.clone();
        specs.remove(&15);
        let run = FinishedRun {
            workflow: &workflow,
            specs: &specs,
            statuses: &statuses,
        };
        assert!(matches!(
            draft(&run, "b").unwrap_err(),
            RestartError::Removed { task: 15, .. }
        ));
    }
}
