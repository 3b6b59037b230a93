//! Groups and pauses: each task runs in a group (its spec's, or the default one; a task
//! whose group was removed runs in the default group), whose parallel limit caps how many
//! of its tasks run at once, on top of the nodes' slots. A paused group starts none of its
//! tasks, a paused queue none at all. A ready task its group holds back waits in the
//! group's own queue, and goes back to the ready queue when a slot of the group frees, its
//! limit rises, or it is resumed.
//!
//! A pause of the queue or of a group also pauses its running tasks (their processes get
//! SIGSTOP), unless it lets them finish; a resume continues them. A running task may be
//! paused and resumed on its own. The pause is in the task's record (`paused_at`), so a
//! restart keeps it; the controls are stored with every change.

use std::sync::Arc;

use orch_protocol::{
    DEFAULT_GROUP, ErrorKind, ErrorReply, EventKind, GroupSettings, GroupView, MAX_GROUPS,
    QueueChange, QueueView, Task, TaskId, TaskSpec, TaskState, check_group_name,
};

use super::queue::ReadyQueue;
use super::{EngineState, Outcome, Reply, conflict};

/// What a pause or resume of a task that is not running can do instead.
const PAUSE_HINT: &str = " (`orch pause --group` holds the queued tasks of a group)";

impl EngineState {
    /// The group `spec` runs in now: its own while it exists, else the default group.
    pub(super) fn group_of(&self, spec: &TaskSpec) -> Arc<str> {
        let name = spec.group_name();
        match self.controls.groups.get_key_value(name) {
            Some((name, _)) => Arc::from(name.as_str()),
            None => Arc::from(DEFAULT_GROUP),
        }
    }

    /// Refuses spec number `index` when it names a group that does not exist.
    pub(super) fn grouped(&self, spec: &TaskSpec, index: usize) -> Result<(), ErrorReply> {
        match &spec.group {
            Some(group) if !self.controls.groups.contains_key(group) => Err(ErrorReply::field(
                ErrorKind::BadRequest,
                "group",
                format!(
                    "task #{index} names the group {group:?}, which does not exist (`orch group add {group}` creates it)"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Whether queued task `id` (held in full) may start now under its group: when its
    /// group is paused or at its limit, it is held back in the group's queue instead.
    pub(super) fn group_allows(&mut self, id: TaskId) -> bool {
        let spec = &self.tasks[&id].spec;
        let priority = spec.priority;
        let group = self.group_of(spec);
        let settings = &self.controls.groups[&*group];
        let running = self.group_running.get(&group).copied().unwrap_or(0);
        let full = settings.parallel.is_some_and(|l| running >= l as usize);
        if !settings.paused && !full {
            return true;
        }
        self.held_back.entry(group).or_default().push(priority, id);
        false
    }

    /// One more task of `group` runs.
    pub(super) fn group_started(&mut self, group: &Arc<str>) {
        *self.group_running.entry(group.clone()).or_default() += 1;
    }

    /// A task of `group` stopped running: the next task it held back may start.
    pub(super) fn group_stopped(&mut self, group: &Arc<str>) {
        if let Some(running) = self.group_running.get_mut(group) {
            *running = running.saturating_sub(1);
        }
        self.release_free(group, Some(1));
    }

    /// A queued task of `group` will not start (cancelled): it may have been released
    /// for a slot another held-back task now takes.
    pub(super) fn group_task_dropped(&mut self, group: &Arc<str>) {
        self.release_free(group, Some(1));
    }

    /// Queued task `id` waits aside (for a node with its labels, or for its workflow's
    /// limit) without taking its group's slot: a task its group held back may take it.
    pub(super) fn parked(&mut self, id: TaskId) {
        let group = self.group_of(&self.tasks[&id].spec);
        self.release_free(&group, Some(1));
    }

    /// Puts back in the ready queue as many of the tasks `group` held back as it has
    /// free slots (at most `at_most`; all when neither bounds it). Releasing only what
    /// can start keeps a long held-back queue from being read again and again.
    fn release_free(&mut self, group: &str, at_most: Option<usize>) {
        let Some(settings) = self.controls.groups.get(group) else {
            return self.release_held(group, at_most); // removed: to the default group
        };
        if settings.paused {
            return;
        }
        let running = self.group_running.get(group).copied().unwrap_or(0);
        let free = settings
            .parallel
            .map(|limit| (limit as usize).saturating_sub(running));
        let count = match (free, at_most) {
            (Some(free), Some(n)) => Some(free.min(n)),
            (free, n) => free.or(n),
        };
        if count != Some(0) {
            self.release_held(group, count);
        }
    }

    /// Puts back in the ready queue up to `count` (all when `None`) of the tasks `group`
    /// held back that are still queued, highest priority first.
    fn release_held(&mut self, group: &str, count: Option<usize>) {
        let Some(held) = self.held_back.get_mut(group) else {
            return;
        };
        let mut released = Vec::new();
        while count.is_none_or(|n| released.len() < n) {
            let Some((held_at, id)) = held.pop_entry() else {
                break;
            };
            let priority = match (self.cold.get(&id), self.tasks.get(&id)) {
                (Some(priority), _) => *priority,
                (None, Some(task)) if matches!(task.state, TaskState::Queued { .. }) => {
                    task.spec.priority
                }
                _ => continue, // cancelled or stashed meanwhile
            };
            if priority != held_at {
                continue; // edited since: queued again at its new priority
            }
            released.push((priority, id));
        }
        if held.is_empty() {
            self.held_back.remove(group);
        }
        for (priority, id) in released {
            self.ready.push(priority, id);
        }
    }

    /// Carries out a change of the queue's controls (stored with the change).
    pub(super) fn change_queue(&mut self, change: QueueChange, reply: Reply<QueueView>) -> Outcome {
        let done = match change {
            QueueChange::AddGroup { name, parallel } => self.add_group(name, parallel),
            QueueChange::RemoveGroup { name } => self.remove_group(&name),
            QueueChange::Parallel { group, limit } => self.set_parallel(group, limit),
            QueueChange::Pause { group, wait } => self.pause_queue(group, wait),
            QueueChange::Resume { group } => self.resume_queue(group),
        };
        match done {
            Ok(outcome) => {
                self.step.batch.controls = Some(self.controls.clone());
                // What the change lets start now is counted in the answer.
                self.dispatch();
                let view = self.queue_view();
                self.answer(reply, Ok(view));
                Ok(outcome)
            }
            Err(error) => self.refuse(reply, error),
        }
    }

    fn add_group(&mut self, name: String, parallel: Option<u32>) -> Result<String, ErrorReply> {
        check_group_name(&name).map_err(|why| bad("name", why))?;
        if self.controls.groups.contains_key(&name) {
            return Err(ErrorReply::field(
                ErrorKind::Conflict,
                "name",
                format!("the group {name:?} exists already"),
            ));
        }
        if self.controls.groups.len() >= MAX_GROUPS {
            return Err(bad(
                "name",
                format!("there are {MAX_GROUPS} groups already, the most a daemon keeps"),
            ));
        }
        let parallel = parallel.filter(|&l| l > 0);
        let settings = GroupSettings {
            parallel,
            paused: false,
        };
        self.controls.groups.insert(name.clone(), settings);
        // Tasks that name it and waited in the default group (it was removed once) go
        // back to the queue, to wait in their own group from now on.
        self.release_held(DEFAULT_GROUP, None);
        Ok(format!("group {name} added ({})", limit_words(parallel)))
    }

    fn remove_group(&mut self, name: &str) -> Result<String, ErrorReply> {
        if name == DEFAULT_GROUP {
            return Err(bad("name", "the default group cannot be removed".into()));
        }
        self.known_group(name, "name")?;
        self.controls.groups.remove(name);
        // Its waiting tasks run in the default group from now on.
        self.release_held(name, None);
        Ok(format!(
            "group {name} removed; its tasks run in the default group"
        ))
    }

    fn set_parallel(&mut self, group: Option<String>, limit: u32) -> Result<String, ErrorReply> {
        let name = group.unwrap_or_else(|| DEFAULT_GROUP.to_string());
        self.known_group(&name, "group")?;
        let parallel = (limit > 0).then_some(limit);
        self.controls
            .groups
            .get_mut(&name)
            .expect("checked above")
            .parallel = parallel;
        self.release_free(&name, None);
        Ok(format!("group {name}: {}", limit_words(parallel)))
    }

    fn pause_queue(&mut self, group: Option<String>, wait: bool) -> Result<String, ErrorReply> {
        let scope = match &group {
            Some(name) => {
                self.known_group(name, "group")?;
                self.controls.groups.get_mut(name).expect("checked").paused = true;
                format!("group {name}")
            }
            None => {
                self.controls.paused = true;
                "the queue".to_string()
            }
        };
        if wait {
            return Ok(format!("{scope} paused; its running tasks finish"));
        }
        let paused = self.set_running_paused(group.as_deref(), true);
        Ok(format!("{scope} paused, with {paused} running task(s)"))
    }

    fn resume_queue(&mut self, group: Option<String>) -> Result<String, ErrorReply> {
        let scope = match &group {
            Some(name) => {
                self.known_group(name, "group")?;
                self.controls.groups.get_mut(name).expect("checked").paused = false;
                self.release_free(name, None);
                format!("group {name}")
            }
            None => {
                self.controls.paused = false;
                "the queue".to_string()
            }
        };
        let resumed = self.set_running_paused(group.as_deref(), false);
        Ok(format!("{scope} resumed, with {resumed} paused task(s)"))
    }

    /// Pauses (or resumes) the running tasks of `group` (all when `None`) that are not so
    /// already and are not being stopped; how many changed. A resume of the whole queue
    /// leaves the tasks of a paused group paused.
    fn set_running_paused(&mut self, group: Option<&str>, paused: bool) -> usize {
        let group_paused = |name: &str| self.controls.groups.get(name).is_some_and(|g| g.paused);
        let mut ids: Vec<TaskId> = self
            .running
            .iter()
            .filter(|(_, r)| r.stop.is_none() && group.is_none_or(|g| *r.group == *g))
            .filter(|(_, r)| paused || group.is_some() || !group_paused(&r.group))
            .map(|(id, _)| *id)
            .filter(|id| self.is_paused(*id) != paused)
            .collect();
        ids.sort_unstable();
        for id in &ids {
            self.set_paused(*id, paused);
        }
        ids.len()
    }

    /// Whether running task `id` is paused.
    fn is_paused(&self, id: TaskId) -> bool {
        matches!(
            self.tasks[&id].state,
            TaskState::Running {
                paused_at: Some(_),
                ..
            }
        )
    }

    /// Records running task `id` as paused (or not), and has its processes stopped (or
    /// continued) once that is durable.
    fn set_paused(&mut self, id: TaskId, paused: bool) {
        let TaskState::Running {
            attempt,
            started_at,
            ..
        } = self.tasks[&id].state
        else {
            return;
        };
        let paused_at = paused.then_some(self.now);
        let state = TaskState::Running {
            attempt,
            started_at,
            paused_at,
        };
        let kind = if paused {
            EventKind::Paused { attempt }
        } else {
            EventKind::Resumed { attempt }
        };
        self.transition(id, state, kind);
        self.step.effects.pauses.push((id, attempt, paused));
    }

    /// Pauses running task `id` (its processes get SIGSTOP).
    pub(super) fn pause_task(&mut self, id: TaskId, reply: Reply<Task>) -> Outcome {
        if let Err(error) = self.steerable(id, "paused", PAUSE_HINT) {
            return self.refuse(reply, error);
        }
        let outcome = if self.is_paused(id) {
            format!("task {id} was paused already")
        } else {
            self.set_paused(id, true);
            format!("task {id} paused")
        };
        let task = self.copy_of(id);
        self.answer(reply, Ok(task));
        Ok(outcome)
    }

    /// Resumes paused task `id` (its processes get SIGCONT).
    pub(super) fn resume_task(&mut self, id: TaskId, reply: Reply<Task>) -> Outcome {
        if let Err(error) = self.steerable(id, "resumed", PAUSE_HINT) {
            return self.refuse(reply, error);
        }
        let outcome = if self.is_paused(id) {
            self.set_paused(id, false);
            format!("task {id} resumed")
        } else {
            format!("task {id} was not paused")
        };
        let task = self.copy_of(id);
        self.answer(reply, Ok(task));
        Ok(outcome)
    }

    /// Refuses a request about the processes of `id` (a pause, a resume, a signal)
    /// unless it runs and is not being stopped (`what` says what the request does to it, `hint` what to do instead of it for a
    /// task that is not running.)
    pub(super) fn steerable(
        &mut self,
        id: TaskId,
        what: &str,
        hint: &str,
    ) -> Result<(), ErrorReply> {
        if !self.hold(id) {
            return Err(ErrorReply::field(
                ErrorKind::NotFound,
                "id",
                format!("task {id} does not exist"),
            ));
        }
        let status = self.tasks[&id].state.status();
        match self.running.get(&id) {
            None => Err(conflict(format!(
                "task {id} is {}: only a running task is {what}{hint}",
                status.as_str()
            ))),
            Some(r) if r.stop.is_some() => Err(conflict(format!(
                "task {id} is being stopped; it cannot be {what}"
            ))),
            Some(_) => Ok(()),
        }
    }

    /// Refuses a change naming a group that does not exist.
    fn known_group(&self, name: &str, field: &str) -> Result<(), ErrorReply> {
        if self.controls.groups.contains_key(name) {
            return Ok(());
        }
        Err(ErrorReply::field(
            ErrorKind::NotFound,
            field,
            format!("the group {name:?} does not exist (`orch group list` shows the groups)"),
        ))
    }

    /// The queue's controls, with how many tasks of each group run now.
    pub fn queue_view(&self) -> QueueView {
        let groups = self
            .controls
            .groups
            .iter()
            .map(|(name, settings)| GroupView {
                name: name.clone(),
                parallel: settings.parallel,
                paused: settings.paused,
                running: self.group_running.get(name.as_str()).copied().unwrap_or(0) as u64,
            });
        QueueView {
            paused: self.controls.paused,
            groups: groups.collect(),
        }
    }
}

/// A refusal of a bad value of `field`.
fn bad(field: &str, message: String) -> ErrorReply {
    ErrorReply::field(ErrorKind::BadRequest, field, message)
}

/// A group's limit, in words.
fn limit_words(parallel: Option<u32>) -> String {
    match parallel {
        Some(limit) => format!("at most {limit} at once"),
        None => "no limit of its own".into(),
    }
}

/// The held-back queue of a group, as the engine keeps it.
pub(super) type HeldBack = std::collections::HashMap<Arc<str>, ReadyQueue>;
