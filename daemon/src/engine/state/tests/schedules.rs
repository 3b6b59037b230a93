//! Schedules: a task submitted at each time of its pattern, in the step that moves the
//! schedule on; missed times by their catch-up policy; pauses; scheduled workflows
//! expanded by the driver; refusals; a restart keeps the next time.

use chrono::Duration;
use orch_protocol::{
    CatchUp, ErrorKind, Schedule, ScheduleChange, ScheduleSpec, ScheduledWork, WorkflowRequest,
};

use super::*;
use crate::engine::effects::ScheduleTimer;

/// A schedule of [`task`] every ten seconds.
fn every_ten_seconds(name: &str, catch_up: CatchUp) -> ScheduleSpec {
    ScheduleSpec {
        name: name.into(),
        cron: "*/10 * * * * *".into(),
        timezone: None,
        catch_up,
        work: ScheduledWork::Task {
            task: Box::new(task()),
        },
    }
}

impl Harness {
    fn add_schedule(&mut self, spec: ScheduleSpec) -> (Step, Answered<Schedule>) {
        self.ask(|reply| Command::AddSchedule {
            actor: actor(),
            spec,
            owner_host: Some("here".into()),
            reply,
        })
    }

    fn change_schedule(&mut self, name: &str, change: ScheduleChange) -> Schedule {
        self.ask(|reply| Command::ChangeSchedule {
            actor: actor(),
            name: name.into(),
            change,
            reply,
        })
        .1
        .value()
    }

    /// The clock moves to the timer's time plus `late_ms`, and it fires.
    fn due(&mut self, timer: &ScheduleTimer, late_ms: i64) -> Step {
        self.now = timer.due + Duration::milliseconds(late_ms);
        let input = Input::ScheduleDue {
            name: timer.schedule.clone(),
            slot: timer.due,
        };
        self.turn(vec![input])
    }

    fn scheduled(&self, name: &str) -> Schedule {
        self.state.schedule(name).expect("a schedule").clone()
    }
}

#[test]
fn each_time_submits_the_task_in_the_step_that_moves_the_schedule_on() {
    let mut h = Harness::new(4);
    let (step, mut answer) = h.add_schedule(every_ten_seconds("tick", CatchUp::Skip));
    let schedule = answer.value();
    assert_eq!(schedule.next_run, Some(t0() + Duration::seconds(10)));
    assert_eq!(step.batch.schedules, vec![schedule.clone()]);
    let timer = step.effects.schedule_timers[0].clone();
    assert_eq!(timer.due, t0() + Duration::seconds(10));
    let step = h.due(&timer, 5);
    assert_eq!(step.launched().len(), 1, "the task was created and started");
    let stored = &step.batch.schedules[0];
    assert_eq!(stored.runs, 1);
    assert_eq!(stored.next_run, Some(t0() + Duration::seconds(20)));
    let run = stored.last_run.as_ref().unwrap();
    assert_eq!((run.slot, run.id), (timer.due, Some(step.launched()[0])));
    assert_eq!(
        step.effects.schedule_timers[0].due,
        t0() + Duration::seconds(20)
    );
    // A timer of a time that is not the next one (armed twice) does nothing.
    assert!(h.due(&timer, 6).batch.schedules.is_empty());
}

#[test]
fn missed_times_follow_the_catch_up_policy() {
    for (policy, runs) in [(CatchUp::Skip, 0), (CatchUp::Once, 1), (CatchUp::All, 30)] {
        let mut h = Harness::new(64);
        let (step, _) = h.add_schedule(every_ten_seconds("tick", policy));
        let mut timer = step.effects.schedule_timers[0].clone();
        // Down for five minutes: 30 times missed.
        let back = timer.due + Duration::seconds(295);
        let mut created = 0;
        loop {
            h.now = back.max(h.now);
            let step = h.turn(vec![Input::ScheduleDue {
                name: "tick".into(),
                slot: timer.due,
            }]);
            created += step.launched().len();
            timer = step.effects.schedule_timers[0].clone();
            if timer.due > h.now {
                break;
            }
        }
        let schedule = h.scheduled("tick");
        assert_eq!((created, schedule.runs), (runs, runs as u64), "{policy:?}");
        assert_eq!(
            schedule.next_run,
            Some(back + Duration::seconds(5)),
            "{policy:?}"
        );
        if policy == CatchUp::Skip {
            assert_eq!(schedule.skipped, 30);
        }
    }
}

#[test]
fn a_paused_schedule_submits_nothing_and_a_resume_catches_up_by_policy() {
    let mut h = Harness::new(4);
    let (step, _) = h.add_schedule(every_ten_seconds("tick", CatchUp::Once));
    let timer = step.effects.schedule_timers[0].clone();
    assert!(h.change_schedule("tick", ScheduleChange::Pause).paused);
    assert!(h.due(&timer, 0).launched().is_empty());
    h.later(120_000);
    let (step, mut answer) = h.ask(|reply| Command::ChangeSchedule {
        actor: actor(),
        name: "tick".into(),
        change: ScheduleChange::Resume,
        reply,
    });
    assert!(!answer.value().paused);
    let rearmed = step.effects.schedule_timers[0].clone();
    assert_eq!(rearmed.due, timer.due, "its missed time fires at once");
    let step = h.due(&rearmed, 120_000);
    assert_eq!(step.launched().len(), 1, "once for all the missed times");
    let removed = h.change_schedule("tick", ScheduleChange::Remove);
    assert_eq!(removed.runs, 1);
    assert!(h.state.schedule("tick").is_none());
}

#[test]
fn a_scheduled_workflow_is_expanded_by_the_driver_then_created() {
    let mut h = Harness::new(4);
    let request: WorkflowRequest = serde_json::from_value(serde_json::json!({
        "kind": "servers", "infra": "lab"
    }))
    .unwrap();
    let mut spec = every_ten_seconds("nightly", CatchUp::Skip);
    spec.work = ScheduledWork::Workflow {
        workflow: Box::new(request.clone()),
    };
    let (step, _) = h.add_schedule(spec);
    let timer = step.effects.schedule_timers[0].clone();
    let step = h.due(&timer, 0);
    assert_eq!(step.effects.expansions.len(), 1);
    assert_eq!(step.effects.expansions[0].request, request);
    assert!(
        step.batch.schedules.is_empty(),
        "nothing moves before the expansion"
    );
    // The same time again while it is being expanded does nothing.
    assert!(h.due(&timer, 10).effects.expansions.is_empty());
    let fire = Command::FireSchedule {
        name: "nightly".into(),
        slot: timer.due,
        draft: Ok(Box::new(draft(&[("a", &[], false)], None, false))),
    };
    let step = h.turn(vec![Input::Request(fire)]);
    let schedule = &step.batch.schedules[0];
    let id = schedule.last_run.as_ref().unwrap().id.unwrap();
    assert!(h.state.workflows.contains_key(&id));
    assert_eq!(schedule.next_run, Some(timer.due + Duration::seconds(10)));
    // An expansion that failed is recorded, and the schedule goes on.
    let next = step.effects.schedule_timers[0].clone();
    h.due(&next, 0);
    let fire = Command::FireSchedule {
        name: "nightly".into(),
        slot: next.due,
        draft: Err("no infra lab".into()),
    };
    let step = h.turn(vec![Input::Request(fire)]);
    let schedule = &step.batch.schedules[0];
    let run = schedule.last_run.as_ref().unwrap();
    assert_eq!((run.id, run.error.as_deref()), (None, Some("no infra lab")));
    assert_eq!(schedule.runs, 1);
}

#[test]
fn bad_schedules_are_refused_naming_the_field() {
    let mut h = Harness::new(1);
    h.add_schedule(every_ten_seconds("tick", CatchUp::Skip))
        .1
        .value();
    let error = h
        .add_schedule(every_ten_seconds("tick", CatchUp::Skip))
        .1
        .error();
    assert_eq!(
        (error.kind, error.field.as_deref()),
        (ErrorKind::Conflict, Some("name"))
    );
    let mut bad_cron = every_ten_seconds("other", CatchUp::Skip);
    bad_cron.cron = "every day".into();
    let error = h.add_schedule(bad_cron).1.error();
    assert_eq!(error.field.as_deref(), Some("cron"));
    let mut never = every_ten_seconds("never", CatchUp::Skip);
    never.cron = "0 0 0 30 2 *".into();
    let error = h.add_schedule(never).1.error();
    assert_eq!(error.field.as_deref(), Some("cron"));
    let mut dependent = every_ten_seconds("dependent", CatchUp::Skip);
    dependent.work = ScheduledWork::Task {
        task: Box::new(after(&[1])),
    };
    let error = h.add_schedule(dependent).1.error();
    assert_eq!(error.field.as_deref(), Some("after"));
    let mut grouped = every_ten_seconds("grouped", CatchUp::Skip);
    grouped.work = ScheduledWork::Task {
        task: Box::new(TaskSpec {
            group: Some("nope".into()),
            ..task()
        }),
    };
    assert_eq!(
        h.add_schedule(grouped).1.error().field.as_deref(),
        Some("group")
    );
    let mut unknown = h.ask(|reply| Command::ChangeSchedule {
        actor: actor(),
        name: "nope".into(),
        change: ScheduleChange::Pause,
        reply,
    });
    assert_eq!(unknown.1.error().kind, ErrorKind::NotFound);
}

#[test]
fn a_restart_keeps_the_next_time_and_arms_it() {
    let mut h = Harness::new(4);
    let (step, _) = h.add_schedule(every_ten_seconds("tick", CatchUp::Skip));
    let timer = step.effects.schedule_timers[0].clone();
    h.due(&timer, 0);
    let (h, step) = h.restarted(4, t0() + Duration::seconds(15));
    assert_eq!(
        step.effects.schedule_timers,
        vec![ScheduleTimer {
            schedule: "tick".into(),
            due: t0() + Duration::seconds(20)
        }]
    );
    assert_eq!(h.scheduled("tick").runs, 1);
}
