//! Which finished tasks and workflows a clean removes: pure functions over records, shared
//! by `orch clean` and the daemon's own retention (`--retain-finished`).
//!
//! The rule, in order:
//! 1. a task outside any workflow is a candidate when it is final, in one of the asked
//!    states, has the asked label, and finished longer ago than its label keeps it (the
//!    default otherwise; `never` keeps it for ever);
//! 2. a workflow is a candidate (with all its steps and compensations, as one unit) when
//!    workflows are asked for, it is final, every one of its tasks is final, and it
//!    finished longer ago than the longest any of its tasks' labels keeps;
//! 3. a candidate that a kept task depends on (hard or soft) stays (a retry of the kept
//!    task needs it), and so does the whole workflow of such a step; this repeats until
//!    nothing changes;
//! 4. at most `limit` records go in one removal, the newest units first (a dependency is
//!    older than its dependant, so a long chain is cut from its end and the rest follows
//!    in the next removals), and rule 3 is applied again to what was taken.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use orch_protocol::{Task, TaskId, TaskStatus, Workflow, WorkflowId, WorkflowState};
use serde::{Serialize, Serializer};

/// How long a finished record is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// For ever.
    Forever,
    /// This long after it finished.
    For(Duration),
}

impl Keep {
    /// True when something that finished at `finished` is past this retention at `now`.
    pub fn expired(self, finished: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        match self {
            Keep::Forever => false,
            Keep::For(age) => chrono::Duration::from_std(age)
                .ok()
                .and_then(|age| finished.checked_add_signed(age))
                .is_some_and(|due| due <= now),
        }
    }

    /// The longer of two retentions.
    fn longest(self, other: Keep) -> Keep {
        match (self, other) {
            (Keep::For(a), Keep::For(b)) => Keep::For(a.max(b)),
            _ => Keep::Forever,
        }
    }
}

impl std::fmt::Display for Keep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Keep::Forever => f.write_str("never"),
            Keep::For(age) => write!(f, "{}", humantime::format_duration(*age)),
        }
    }
}

impl Serialize for Keep {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// What one clean removes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rule {
    /// How long finished tasks (and workflows) are kept by default.
    pub keep: Keep,
    /// Per-label retentions, longer or shorter than the default.
    pub labels: BTreeMap<String, Keep>,
    /// Only tasks with this label (and workflows with a task of it).
    pub only_label: Option<String>,
    /// Only tasks in these final states (all when empty); workflows are chosen by their
    /// own final state.
    pub status: Vec<TaskStatus>,
    /// Whole workflows too.
    pub workflows: bool,
    /// At most this many records (tasks and workflows) removed at once.
    pub limit: usize,
    /// Run by the daemon's retention (not asked for): a run that removes nothing is not
    /// recorded in the audit log.
    pub retention: bool,
}

impl Rule {
    /// How long a task with `label` is kept.
    pub fn keep_for(&self, label: Option<&str>) -> Keep {
        label
            .and_then(|l| self.labels.get(l))
            .copied()
            .unwrap_or(self.keep)
    }

    fn has_label(&self, label: Option<&str>) -> bool {
        self.only_label.as_deref().is_none_or(|l| label == Some(l))
    }
}

/// What a clean removes: tasks (workflow steps and compensations included) and workflow
/// records, each in ascending id order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// The tasks.
    pub tasks: Vec<TaskId>,
    /// The workflows.
    pub workflows: Vec<WorkflowId>,
}

impl Selection {
    /// How many records it removes.
    pub fn len(&self) -> usize {
        self.tasks.len() + self.workflows.len()
    }

    /// True when it removes nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// When a workflow reached its final state (none while it is not final).
pub fn workflow_finished_at(workflow: &Workflow) -> Option<DateTime<Utc>> {
    match &workflow.state {
        WorkflowState::Succeeded { finished_at }
        | WorkflowState::Failed { finished_at, .. }
        | WorkflowState::RolledBack { finished_at, .. }
        | WorkflowState::RollbackFailed { finished_at, .. } => Some(*finished_at),
        WorkflowState::Cancelled { at } => Some(*at),
        WorkflowState::Running { .. } | WorkflowState::RollingBack { .. } => None,
    }
}

/// The ids of a workflow's tasks: its steps' and its compensations'.
pub fn workflow_tasks(workflow: &Workflow) -> impl Iterator<Item = TaskId> + '_ {
    let steps = workflow.steps.iter().map(|s| s.task);
    steps.chain(workflow.rollback_steps.iter().map(|r| r.task))
}

/// The tasks a selection looks at: those the engine holds, and the finished ones outside
/// workflows read from the store for it (none of them held).
pub struct Tasks<'a> {
    /// The tasks held in memory.
    pub held: &'a HashMap<TaskId, Task>,
    /// Finished tasks read from the store.
    pub stored: &'a HashMap<TaskId, Task>,
}

impl Tasks<'_> {
    fn get(&self, id: &TaskId) -> Option<&Task> {
        self.held.get(id).or_else(|| self.stored.get(id))
    }

    fn contains_key(&self, id: &TaskId) -> bool {
        self.held.contains_key(id) || self.stored.contains_key(id)
    }

    fn values(&self) -> impl Iterator<Item = &Task> {
        self.held.values().chain(self.stored.values())
    }
}

/// Whether a finished task read from the store can matter to `rule`'s selection: it may
/// go, or it keeps what it depends on. Others need not be read into memory.
pub fn may_matter(task: &Task, rule: &Rule, now: DateTime<Utc>) -> bool {
    task_expired(task, rule, now) || dependencies(task).next().is_some()
}

/// A unit of removal: one task, or one workflow with its tasks.
enum Unit {
    Task(TaskId),
    Workflow(WorkflowId, Vec<TaskId>),
}

impl Unit {
    fn newest(&self) -> u64 {
        match self {
            Unit::Task(id) => *id,
            Unit::Workflow(id, tasks) => tasks.iter().copied().max().unwrap_or(*id).max(*id),
        }
    }

    fn len(&self) -> usize {
        match self {
            Unit::Task(_) => 1,
            Unit::Workflow(_, tasks) => tasks.len() + 1,
        }
    }
}

/// What `rule` removes at `now` from `tasks` (every task there is, finished or not) and
/// `workflows` (every workflow).
pub fn select(
    tasks: &Tasks<'_>,
    workflows: &HashMap<WorkflowId, Workflow>,
    rule: &Rule,
    now: DateTime<Utc>,
) -> Selection {
    let mut units: Vec<Unit> = tasks
        .values()
        .filter(|t| t.spec.workflow.is_none() && task_expired(t, rule, now))
        .map(|t| Unit::Task(t.id))
        .collect();
    if rule.workflows {
        units.extend(
            workflows
                .values()
                .filter(|w| workflow_expired(w, tasks, rule, now))
                .map(|w| Unit::Workflow(w.id, workflow_tasks(w).collect())),
        );
    }
    let units = keep_needed(units, tasks);
    let mut taken = Vec::new();
    let mut count = 0;
    let mut ordered = units;
    ordered.sort_unstable_by_key(|u| std::cmp::Reverse(u.newest()));
    for unit in ordered {
        if count + unit.len() > rule.limit {
            continue;
        }
        count += unit.len();
        taken.push(unit);
    }
    let mut selection = Selection::default();
    for unit in keep_needed(taken, tasks) {
        match unit {
            Unit::Task(id) => selection.tasks.push(id),
            Unit::Workflow(id, steps) => {
                selection.workflows.push(id);
                selection
                    .tasks
                    .extend(steps.into_iter().filter(|t| tasks.contains_key(t)));
            }
        }
    }
    selection.tasks.sort_unstable();
    selection.workflows.sort_unstable();
    selection
}

/// Whether a task outside workflows is past `rule`'s retention.
fn task_expired(task: &Task, rule: &Rule, now: DateTime<Utc>) -> bool {
    let Some(finished) = task.state.finished_at() else {
        return false;
    };
    let label = task.spec.label.as_deref();
    (rule.status.is_empty() || rule.status.contains(&task.state.status()))
        && rule.has_label(label)
        && rule.keep_for(label).expired(finished, now)
}

/// Whether a workflow and all its tasks are final and past the longest retention of its
/// tasks' labels.
fn workflow_expired(
    workflow: &Workflow,
    tasks: &Tasks<'_>,
    rule: &Rule,
    now: DateTime<Utc>,
) -> bool {
    let Some(finished) = workflow_finished_at(workflow) else {
        return false;
    };
    let mut keep = rule.keep;
    let mut labelled = rule.only_label.is_none();
    for id in workflow_tasks(workflow) {
        let Some(task) = tasks.get(&id) else {
            continue;
        };
        if !task.state.status().is_final() {
            return false;
        }
        let label = task.spec.label.as_deref();
        labelled |= rule.only_label.is_some() && rule.has_label(label);
        keep = keep.longest(rule.keep_for(label));
    }
    labelled && keep.expired(finished, now)
}

/// `units` without those a task outside them depends on (a workflow goes as a whole),
/// repeated until nothing changes.
fn keep_needed(units: Vec<Unit>, tasks: &Tasks<'_>) -> Vec<Unit> {
    // Which unit each selected task belongs to.
    let mut unit_of: HashMap<TaskId, usize> = HashMap::new();
    for (i, unit) in units.iter().enumerate() {
        match unit {
            Unit::Task(id) => _ = unit_of.insert(*id, i),
            Unit::Workflow(_, steps) => unit_of.extend(steps.iter().map(|t| (*t, i))),
        }
    }
    let mut dropped: HashSet<usize> = HashSet::new();
    let mut pending: Vec<TaskId> = tasks
        .values()
        .filter(|t| !unit_of.contains_key(&t.id))
        .flat_map(dependencies)
        .collect();
    while let Some(needed) = pending.pop() {
        let Some(&i) = unit_of.get(&needed) else {
            continue;
        };
        if !dropped.insert(i) {
            continue;
        }
        // The unit stays: what its tasks depend on stays too.
        let members: Vec<TaskId> = match &units[i] {
            Unit::Task(id) => vec![*id],
            Unit::Workflow(_, steps) => steps.clone(),
        };
        pending.extend(
            members
                .iter()
                .filter_map(|t| tasks.get(t))
                .flat_map(dependencies),
        );
    }
    units
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !dropped.contains(i))
        .map(|(_, unit)| unit)
        .collect()
}

/// What a task depends on, hard or soft.
fn dependencies(task: &Task) -> impl Iterator<Item = TaskId> + '_ {
    task.spec.after.iter().chain(&task.spec.soft_after).copied()
}
