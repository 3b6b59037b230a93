//! Schedules: each has a timer at its next time; when it fires, the schedule's task is
//! created (or its workflow, once the driver has expanded it from the workspace) in the
//! same step that moves the schedule on to its next time, so that a crash at any point
//! runs a time either once or not yet, never twice.
//!
//! A time fired more than [`LATE`] after it came, or once a later time has come too, was
//! missed (the daemon was down, or the schedule paused): `skip` runs none of the missed
//! times and goes on at the next one after now; `once` runs one for all of them; `all`
//! runs each in order, the first [`MAX_CATCH_UP`] of them (the later ones are skipped).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use orch_protocol::{
    Actor, CatchUp, ErrorKind, ErrorReply, MAX_CATCH_UP, MAX_SCHEDULES, Schedule, ScheduleChange,
    ScheduleRun, ScheduleSpec, ScheduledWork, WorkflowRequest,
};

use super::{EngineState, Outcome, Reply};
use crate::engine::effects::{Expansion, ScheduleTimer};
use crate::engine::validate::validate;
use crate::schedules::Times;
use crate::workflows::Draft;

/// How long after its time a schedule's timer may fire and still count as on time.
pub const LATE: chrono::Duration = chrono::Duration::seconds(60);

/// The most missed times a `skip` counts one by one (more are counted as this many).
const MAX_COUNTED_SKIPS: u64 = 1_000;

/// The schedules and what the engine keeps of them besides their records.
#[derive(Default)]
pub(super) struct Schedules {
    /// By name.
    records: HashMap<String, Schedule>,
    /// The parsed pattern of each.
    times: HashMap<String, Times>,
    /// The time of each schedule whose workflow is being expanded, and its next time.
    expanding: HashMap<String, (DateTime<Utc>, Option<DateTime<Utc>>)>,
    /// How many missed times in a row each `catch_up: all` schedule has run.
    caught_up: HashMap<String, u32>,
}

/// What a due time does.
enum Due {
    /// Runs, then the schedule goes on at `next`.
    Run { next: Option<DateTime<Utc>> },
    /// Runs nothing: `skipped` times were missed; the schedule goes on at `next`.
    Skip {
        next: Option<DateTime<Utc>>,
        skipped: u64,
    },
}

impl EngineState {
    /// Takes the stored schedules in at start: each one not paused gets its timer (one
    /// whose time went by fires at once, and its catch-up policy applies).
    pub(super) fn recover_schedules(&mut self, schedules: Vec<Schedule>) {
        for schedule in schedules {
            let name = schedule.spec.name.clone();
            match Times::of(&schedule.spec) {
                Ok(times) => {
                    self.schedules.times.insert(name.clone(), times);
                }
                Err(e) => {
                    tracing::error!(schedule = %name, error = %e.message, "a stored schedule cannot be read: it does not run");
                }
            }
            if !schedule.paused
                && let Some(slot) = schedule.next_run
            {
                self.arm_schedule(&name, slot);
            }
            self.schedules.records.insert(name, schedule);
        }
    }

    /// Creates a schedule (its workflow, if any, was checked by expanding it).
    pub(super) fn add_schedule(
        &mut self,
        actor: Actor,
        spec: ScheduleSpec,
        owner_host: Option<String>,
        reply: Reply<Schedule>,
    ) -> Outcome {
        let checked = self.check_schedule(&spec).and_then(|times| {
            let next = times.next_after(self.now).ok_or_else(|| {
                bad(
                    "cron",
                    format!("the pattern {:?} has no time to come", spec.cron),
                )
            })?;
            Ok((times, next))
        });
        let (times, next) = match checked {
            Ok(checked) => checked,
            Err(error) => return self.refuse(reply, error),
        };
        let name = spec.name.clone();
        let schedule = Schedule {
            spec,
            created_by: actor,
            created_at: self.now,
            owner_host,
            paused: false,
            next_run: Some(next),
            runs: 0,
            skipped: 0,
            last_run: None,
        };
        self.schedules.times.insert(name.clone(), times);
        self.store_schedule(schedule.clone());
        self.arm_schedule(&name, next);
        self.answer(reply, Ok(schedule));
        Ok(format!("schedule {name} added, next at {next}"))
    }

    /// Refuses a schedule that cannot be kept: a bad name, pattern or time zone, a name
    /// taken, too many schedules, or a task that could not be submitted.
    fn check_schedule(&self, spec: &ScheduleSpec) -> Result<Times, ErrorReply> {
        let times = Times::of(spec)?;
        if self.schedules.records.contains_key(&spec.name) {
            return Err(ErrorReply::field(
                ErrorKind::Conflict,
                "name",
                format!("the schedule {:?} exists already", spec.name),
            ));
        }
        if self.schedules.records.len() >= MAX_SCHEDULES {
            return Err(bad(
                "name",
                format!("there are {MAX_SCHEDULES} schedules already, the most a daemon keeps"),
            ));
        }
        if let ScheduledWork::Task { task } = &spec.work {
            validate(task, 0)?;
            self.placeable(task, 0)?;
            self.grouped(task, 0)?;
            let fixed = [
                (
                    !task.after.is_empty() || !task.soft_after.is_empty(),
                    "after",
                ),
                (task.not_before.is_some(), "not_before"),
                (task.workflow.is_some(), "workflow"),
            ];
            if let Some((_, field)) = fixed.iter().find(|(set, _)| *set) {
                return Err(bad(
                    field,
                    format!("a scheduled task cannot have `{field}`: each run is a new task"),
                ));
            }
        }
        Ok(times)
    }

    /// Pauses, resumes or removes a schedule.
    pub(super) fn change_schedule(
        &mut self,
        name: &str,
        change: ScheduleChange,
        reply: Reply<Schedule>,
    ) -> Outcome {
        let Some(schedule) = self.schedules.records.get_mut(name) else {
            let error = ErrorReply::field(
                ErrorKind::NotFound,
                "name",
                format!("the schedule {name:?} does not exist (`orch schedule list` shows them)"),
            );
            return self.refuse(reply, error);
        };
        let outcome = match change {
            ScheduleChange::Pause => {
                schedule.paused = true;
                format!("schedule {name} paused")
            }
            ScheduleChange::Resume => {
                let was_paused = std::mem::replace(&mut schedule.paused, false);
                if let (true, Some(slot)) = (was_paused, schedule.next_run) {
                    self.arm_schedule(name, slot);
                }
                format!("schedule {name} resumed")
            }
            ScheduleChange::Remove => {
                let schedule = self.forget_schedule(name);
                self.step.batch.remove_schedule(name.to_string());
                self.answer(reply, Ok(schedule));
                return Ok(format!("schedule {name} removed"));
            }
        };
        let schedule = self.schedules.records[name].clone();
        self.store_schedule(schedule.clone());
        self.answer(reply, Ok(schedule));
        Ok(outcome)
    }

    /// A schedule's timer fired for `slot`.
    pub(super) fn schedule_due(&mut self, name: String, slot: DateTime<Utc>) {
        let Some(schedule) = self.schedules.records.get(&name) else {
            return; // removed since
        };
        let current = !schedule.paused && schedule.next_run == Some(slot);
        if !current || self.schedules.expanding.contains_key(&name) {
            return; // a timer of an earlier time, or of a paused schedule
        }
        if self.now < slot {
            return self.arm_schedule(&name, slot); // early (the clock was set back)
        }
        let Some(due) = self.due(&name, slot) else {
            return;
        };
        match due {
            Due::Skip { next, skipped } => {
                tracing::info!(schedule = %name, skipped, "missed times skipped");
                self.moved_on(&name, slot, next, skipped, None);
            }
            Due::Run { next } => match self.schedules.records[&name].spec.work.clone() {
                ScheduledWork::Task { task } => {
                    let run = self.run_task(*task);
                    self.ran(&name, slot, next, run);
                }
                ScheduledWork::Workflow { workflow } => {
                    self.expand(&name, (slot, next), *workflow);
                }
            },
        }
    }

    /// What a time due now does, by the schedule's catch-up policy.
    fn due(&mut self, name: &str, slot: DateTime<Utc>) -> Option<Due> {
        let times = self.schedules.times.get(name)?;
        let policy = self.schedules.records[name].spec.catch_up;
        // Missed: long gone, or a later time has come too (the daemon was down).
        let later_came = times.next_after(slot).is_some_and(|next| next <= self.now);
        if self.now - slot <= LATE && !later_came {
            self.schedules.caught_up.remove(name);
            return Some(Due::Run {
                next: times.next_after(slot),
            });
        }
        let caught_up = self
            .schedules
            .caught_up
            .entry(name.to_string())
            .or_default();
        Some(match policy {
            CatchUp::Once => Due::Run {
                next: times.next_after(self.now),
            },
            CatchUp::All if *caught_up < MAX_CATCH_UP => {
                *caught_up += 1;
                Due::Run {
                    next: times.next_after(slot),
                }
            }
            CatchUp::Skip | CatchUp::All => {
                self.schedules.caught_up.remove(name);
                let skipped = missed(times, slot, self.now);
                Due::Skip {
                    next: times.next_after(self.now),
                    skipped,
                }
            }
        })
    }

    /// Creates a scheduled task; its id, or why it could not be.
    fn run_task(&mut self, spec: orch_protocol::TaskSpec) -> Result<u64, String> {
        self.placeable(&spec, 0).map_err(|e| e.message)?;
        Ok(self.create_task(spec, false))
    }

    /// Has the driver expand the schedule's workflow; the run goes on when it answers
    /// ([`Self::fire_schedule`]).
    fn expand(
        &mut self,
        name: &str,
        (slot, next): (DateTime<Utc>, Option<DateTime<Utc>>),
        request: WorkflowRequest,
    ) {
        let owner_host = self.schedules.records[name].owner_host.clone();
        self.schedules
            .expanding
            .insert(name.to_string(), (slot, next));
        self.step.effects.expansions.push(Expansion {
            schedule: name.to_string(),
            slot,
            request,
            owner_host,
        });
    }

    /// The driver expanded the workflow of a schedule's time `slot` (or could not).
    pub(super) fn fire_schedule(
        &mut self,
        name: String,
        slot: DateTime<Utc>,
        draft: Result<Box<Draft>, String>,
    ) {
        let Some(&(expanded, next)) = self.schedules.expanding.get(&name) else {
            return; // removed meanwhile
        };
        if expanded != slot {
            return;
        }
        self.schedules.expanding.remove(&name);
        let still_due = self
            .schedules
            .records
            .get(&name)
            .is_some_and(|s| s.next_run == Some(slot) && !s.paused);
        if !still_due {
            // Paused meanwhile: nothing is submitted; its resume applies the catch-up
            // policy to this time.
            return;
        }
        let run = match draft {
            Ok(draft) => {
                let id = self.next_id;
                let (reply, _) = tokio::sync::oneshot::channel();
                match self.submit_workflow(*draft, reply) {
                    Ok(_) => Ok(id),
                    Err(why) => Err(why),
                }
            }
            Err(why) => Err(why),
        };
        self.ran(&name, slot, next, run);
    }

    /// Records a run of `slot` (what it submitted, or why nothing) and moves on to `next`.
    fn ran(
        &mut self,
        name: &str,
        slot: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
        run: Result<u64, String>,
    ) {
        let schedule = &self.schedules.records[name];
        let actor = Actor {
            uid: schedule.created_by.uid,
            interface: "schedule".into(),
        };
        let params = serde_json::json!({ "name": name, "slot": slot });
        let outcome = match &run {
            Ok(id) => Ok(format!("schedule {name}: submitted {id} for {slot}")),
            Err(why) => Err(format!(
                "schedule {name}: nothing submitted for {slot}: {why}"
            )),
        };
        self.audit(actor, "schedule_run", params, outcome);
        let record = ScheduleRun {
            slot,
            at: self.now,
            id: run.as_ref().ok().copied(),
            error: run.err(),
        };
        self.moved_on(name, slot, next, 0, Some(record));
    }

    /// Moves schedule `name` on from `slot` to `next`, counting a run or skipped times.
    fn moved_on(
        &mut self,
        name: &str,
        slot: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
        skipped: u64,
        run: Option<ScheduleRun>,
    ) {
        let schedule = self
            .schedules
            .records
            .get_mut(name)
            .expect("a known schedule");
        schedule.next_run = next;
        schedule.skipped += skipped;
        if let Some(run) = run {
            schedule.runs += u64::from(run.id.is_some());
            schedule.last_run = Some(run);
        }
        let schedule = schedule.clone();
        self.store_schedule(schedule);
        match next {
            Some(next) => self.arm_schedule(name, next),
            None => {
                tracing::info!(schedule = %name, after = %slot, "the pattern has no more times")
            }
        }
    }

    /// Writes `schedule` with the step.
    fn store_schedule(&mut self, schedule: Schedule) {
        let name = schedule.spec.name.clone();
        self.step.batch.put_schedule(schedule.clone());
        self.schedules.records.insert(name, schedule);
    }

    /// Removes `name` from memory; its record as it was.
    fn forget_schedule(&mut self, name: &str) -> Schedule {
        self.schedules.times.remove(name);
        self.schedules.expanding.remove(name);
        self.schedules.caught_up.remove(name);
        self.schedules
            .records
            .remove(name)
            .expect("a known schedule")
    }

    /// Has the driver arm `name`'s timer for `slot`.
    fn arm_schedule(&mut self, name: &str, slot: DateTime<Utc>) {
        self.step.effects.schedule_timers.push(ScheduleTimer {
            schedule: name.to_string(),
            due: slot,
        });
    }

    /// Schedule `name` as the engine holds it.
    #[cfg(test)]
    pub(super) fn schedule(&self, name: &str) -> Option<&Schedule> {
        self.schedules.records.get(name)
    }

    /// Every schedule, as a restart would find them stored.
    #[cfg(test)]
    pub(super) fn stored_schedules(&self) -> Vec<Schedule> {
        let mut all: Vec<Schedule> = self.schedules.records.values().cloned().collect();
        all.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        all
    }
}

/// How many times of `times` from `slot` up to `now` were missed (at most
/// [`MAX_COUNTED_SKIPS`]).
fn missed(times: &Times, slot: DateTime<Utc>, now: DateTime<Utc>) -> u64 {
    let mut count = 1;
    let mut at = slot;
    while count < MAX_COUNTED_SKIPS {
        match times.next_after(at) {
            Some(next) if next <= now => {
                count += 1;
                at = next;
            }
            _ => break,
        }
    }
    count
}

/// A refusal of a bad value of `field`.
fn bad(field: &str, message: String) -> ErrorReply {
    ErrorReply::field(ErrorKind::BadRequest, field, message)
}
