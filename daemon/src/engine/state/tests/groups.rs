//! Groups and pauses: a group's limit on top of the nodes' slots, changed at run time;
//! a paused queue or group starts nothing and pauses its running tasks unless they may
//! finish; a paused task; a removed group's tasks in the default group; all of it kept
//! across a restart.

use orch_protocol::TaskStatus::{Queued, Running};
use orch_protocol::{ErrorKind, QueueChange, QueueView};

use super::*;
use crate::engine::NodeOffer;

/// [`task`] in `group`.
fn in_group(group: &str) -> TaskSpec {
    TaskSpec {
        group: Some(group.into()),
        ..task()
    }
}

impl Harness {
    /// Changes the queue's controls (which must be accepted).
    pub(super) fn change(&mut self, change: QueueChange) -> (Step, QueueView) {
        let (step, mut answer) = self.ask(|reply| Command::ChangeQueue {
            actor: actor(),
            change,
            reply,
        });
        (step, answer.value())
    }

    /// A change that must be refused.
    fn change_refused(&mut self, change: QueueChange) -> ErrorReply {
        let (step, mut answer) = self.ask(|reply| Command::ChangeQueue {
            actor: actor(),
            change,
            reply,
        });
        assert!(step.batch.controls.is_none(), "a refusal stores nothing");
        answer.error()
    }

    fn add_group(&mut self, name: &str, parallel: Option<u32>) {
        let name = name.into();
        self.change(QueueChange::AddGroup { name, parallel });
    }

    fn pause_task(&mut self, id: TaskId) -> (Step, Answered<Task>) {
        self.ask(|reply| Command::PauseTask {
            actor: actor(),
            id,
            reply,
        })
    }

    fn resume_task(&mut self, id: TaskId) -> (Step, Answered<Task>) {
        self.ask(|reply| Command::ResumeTask {
            actor: actor(),
            id,
            reply,
        })
    }

    fn paused(&self, id: TaskId) -> bool {
        matches!(
            self.task(id).state,
            TaskState::Running {
                paused_at: Some(_),
                ..
            }
        )
    }
}

fn pause(group: Option<&str>, wait: bool) -> QueueChange {
    QueueChange::Pause {
        group: group.map(Into::into),
        wait,
    }
}

fn resume(group: Option<&str>) -> QueueChange {
    QueueChange::Resume {
        group: group.map(Into::into),
    }
}

#[test]
fn a_group_runs_at_most_its_limit_and_the_limit_changes_at_run_time() {
    let mut h = Harness::new(8);
    h.add_group("deploy", Some(2));
    let (step, ids) = h.submit(vec![in_group("deploy"); 5]);
    assert_eq!(step.launched(), ids[..2].to_vec());
    let (step, others) = h.submit(vec![task()]);
    assert_eq!(step.launched(), others, "another group is not held back");
    assert_eq!(h.exit(ids[0], 0).launched(), vec![ids[2]]);
    let (step, view) = h.change(QueueChange::Parallel {
        group: Some("deploy".into()),
        limit: 4,
    });
    assert_eq!(step.launched(), ids[3..].to_vec());
    let deploy = view.groups.iter().find(|g| g.name == "deploy").unwrap();
    assert_eq!((deploy.parallel, deploy.running), (Some(4), 4));
    assert_eq!(
        step.batch.controls.as_ref().unwrap().groups["deploy"].parallel,
        Some(4)
    );
}

#[test]
fn the_default_group_limit_is_set_by_parallel_without_a_group() {
    let mut h = Harness::new(8);
    h.change(QueueChange::Parallel {
        group: None,
        limit: 1,
    });
    let (step, ids) = h.submit(vec![task(), task()]);
    assert_eq!(step.launched(), vec![ids[0]]);
    let step = h
        .change(QueueChange::Parallel {
            group: None,
            limit: 0,
        })
        .0;
    assert_eq!(
        step.launched(),
        vec![ids[1]],
        "0 lifts the group's own limit"
    );
}

#[test]
fn a_paused_queue_starts_nothing_and_pauses_its_running_tasks() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![task(), task()]);
    let (step, view) = h.change(pause(None, false));
    assert!(view.paused);
    assert_eq!(step.effects.pauses, vec![(ids[0], 1, true)]);
    assert_eq!(step.events(), events(&[(ids[0], "paused")]));
    assert!(h.paused(ids[0]));
    let step = h.exit(ids[0], 0);
    assert!(step.launched().is_empty(), "the queue is paused");
    assert_eq!(h.status(ids[1]), Queued);
    let step = h.change(resume(None)).0;
    assert_eq!(step.launched(), vec![ids[1]]);
}

#[test]
fn a_pause_that_waits_lets_running_tasks_finish() {
    let mut h = Harness::new(3);
    h.add_group("deploy", None);
    let (_, ids) = h.submit(vec![in_group("deploy")]);
    let step = h.change(pause(Some("deploy"), true)).0;
    assert!(step.effects.pauses.is_empty());
    assert!(!h.paused(ids[0]));
    let (step, more) = h.submit(vec![in_group("deploy"), task()]);
    assert_eq!(
        step.launched(),
        vec![more[1]],
        "only the other group starts"
    );
    let step = h.change(resume(Some("deploy"))).0;
    assert_eq!(step.launched(), vec![more[0]]);
}

#[test]
fn a_group_pause_pauses_only_its_own_running_tasks_and_resume_continues_them() {
    let mut h = Harness::new(4);
    h.add_group("deploy", None);
    let (_, ids) = h.submit(vec![in_group("deploy"), task()]);
    let step = h.change(pause(Some("deploy"), false)).0;
    assert_eq!(step.effects.pauses, vec![(ids[0], 1, true)]);
    assert!(h.paused(ids[0]) && !h.paused(ids[1]));
    let step = h.change(resume(Some("deploy"))).0;
    assert_eq!(step.effects.pauses, vec![(ids[0], 1, false)]);
    assert_eq!(step.events(), events(&[(ids[0], "resumed")]));
    assert!(!h.paused(ids[0]));
}

#[test]
fn a_running_task_is_paused_and_resumed_on_its_own() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![task(), task()]);
    let (step, mut answer) = h.pause_task(ids[0]);
    assert!(matches!(
        answer.value().state,
        TaskState::Running {
            paused_at: Some(_),
            ..
        }
    ));
    assert_eq!(step.effects.pauses, vec![(ids[0], 1, true)]);
    assert_eq!(
        h.status(ids[0]),
        Running,
        "a paused task still runs (stopped)"
    );
    let (step, mut answer) = h.pause_task(ids[0]);
    answer.value();
    assert!(
        step.effects.pauses.is_empty(),
        "paused already: nothing to do"
    );
    let error = h.pause_task(ids[1]).1.error();
    assert_eq!(error.kind, ErrorKind::Conflict);
    assert!(error.message.contains("queued"), "{}", error.message);
    assert_eq!(h.pause_task(99).1.error().kind, ErrorKind::NotFound);
    let (step, mut answer) = h.resume_task(ids[0]);
    answer.value();
    assert_eq!(step.effects.pauses, vec![(ids[0], 1, false)]);
}

#[test]
fn a_task_being_cancelled_is_not_paused() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![task()]);
    let _waiting = h.cancel(ids[0]);
    let step = h.change(pause(None, false)).0;
    assert!(step.effects.pauses.is_empty());
    assert_eq!(h.pause_task(ids[0]).1.error().kind, ErrorKind::Conflict);
}

#[test]
fn bad_changes_are_refused_naming_the_field() {
    let mut h = Harness::new(1);
    h.add_group("deploy", None);
    let cases = [
        (
            QueueChange::AddGroup {
                name: "deploy".into(),
                parallel: None,
            },
            ErrorKind::Conflict,
            "name",
        ),
        (
            QueueChange::AddGroup {
                name: "../etc".into(),
                parallel: None,
            },
            ErrorKind::BadRequest,
            "name",
        ),
        (
            QueueChange::RemoveGroup {
                name: "default".into(),
            },
            ErrorKind::BadRequest,
            "name",
        ),
        (
            QueueChange::RemoveGroup {
                name: "nope".into(),
            },
            ErrorKind::NotFound,
            "name",
        ),
        (
            QueueChange::Parallel {
                group: Some("nope".into()),
                limit: 2,
            },
            ErrorKind::NotFound,
            "group",
        ),
        (pause(Some("nope"), false), ErrorKind::NotFound, "group"),
        (resume(Some("nope")), ErrorKind::NotFound, "group"),
    ];
    for (change, kind, field) in cases {
        let error = h.change_refused(change.clone());
        assert_eq!(
            (error.kind, error.field.as_deref()),
            (kind, Some(field)),
            "{change:?}"
        );
    }
    let (_, error) = h.submit_refused(vec![in_group("nope")]);
    assert_eq!(error.field.as_deref(), Some("group"));
    assert!(
        error.message.contains("orch group add nope"),
        "{}",
        error.message
    );
}

#[test]
fn a_removed_group_tasks_run_in_the_default_group() {
    let mut h = Harness::new(4);
    h.add_group("deploy", None);
    h.change(pause(Some("deploy"), false));
    h.change(QueueChange::Parallel {
        group: None,
        limit: 1,
    });
    let (step, ids) = h.submit(vec![in_group("deploy"), in_group("deploy")]);
    assert!(step.launched().is_empty());
    let (step, view) = h.change(QueueChange::RemoveGroup {
        name: "deploy".into(),
    });
    assert_eq!(
        step.launched(),
        vec![ids[0]],
        "under the default group's limit"
    );
    assert!(view.groups.iter().all(|g| g.name != "deploy"));
    assert_eq!(h.exit(ids[0], 0).launched(), vec![ids[1]]);
}

#[test]
fn pauses_and_limits_are_kept_across_a_restart() {
    let mut h = Harness::new(4);
    h.add_group("deploy", Some(1));
    let (_, ids) = h.submit(vec![in_group("deploy"), in_group("deploy"), task()]);
    h.pause_task(ids[0]).1.value();
    h.change(pause(None, true));
    let adopted: HashSet<TaskId> = [ids[0], ids[2]].into();
    let (mut h, step) = h.adopting(4, t0(), &adopted);
    assert_eq!(
        step.effects.pauses,
        vec![(ids[0], 1, true), (ids[2], 1, false)],
        "the runner learns whether each is paused"
    );
    assert!(h.paused(ids[0]));
    assert!(h.state.controls.paused);
    let step = h.change(resume(None)).0;
    assert_eq!(step.effects.pauses, vec![(ids[0], 1, false)]);
    assert!(step.launched().is_empty(), "deploy runs one already");
    assert_eq!(h.exit(ids[0], 0).launched(), vec![ids[1]]);
}

#[test]
fn a_cancelled_task_gives_its_released_slot_to_the_next_one() {
    let mut h = Harness::new(8);
    h.add_group("deploy", Some(1));
    let (_, ids) = h.submit(vec![in_group("deploy"); 3]);
    // ids[1] and ids[2] are held back; the end of ids[0] releases ids[1], which is
    // cancelled in the same turn before it starts.
    let (id0, id1) = (ids[0], ids[1]);
    let attempt = h.running_attempt(id0);
    let (reply, _answer) = oneshot::channel();
    let step = h.turn(vec![
        Input::Report(Report {
            id: id0,
            attempt,
            kind: exited(0),
        }),
        Input::Request(Command::Cancel {
            actor: actor(),
            id: id1,
            reply,
        }),
    ]);
    assert_eq!(step.launched(), vec![ids[2]], "the slot is not lost");
}

#[test]
fn a_long_held_back_queue_is_read_a_bounded_number_at_a_time() {
    let mut h = Harness::new(2);
    h.add_group("deploy", None);
    h.change(pause(None, true));
    h.change(pause(Some("deploy"), true));
    // Queued while nothing starts: once committed they are held by priority only.
    let (_, held) = h.submit(vec![in_group("deploy"); 600]);
    let (_, other) = h.submit(vec![task()]);
    h.change(resume(None));
    let set_aside = |h: &Harness| h.state.held_back.get("deploy").map_or(0, |q| q.len());
    // At most 256 a dispatch (the change's own, then the turn's).
    assert_eq!(
        set_aside(&h),
        512,
        "one turn reads a bounded number of them"
    );
    let mut turns = 0;
    while h.status(other[0]) != Running {
        h.turn(Vec::new());
        turns += 1;
        assert!(turns < 5, "the next turns go on");
    }
    assert_eq!(set_aside(&h), 600);
    assert!(held.iter().all(|id| h.status(*id) == Queued));
    let step = h.change(resume(Some("deploy"))).0;
    assert_eq!(step.launched().len(), 1, "one free slot: one started");
}

#[test]
fn a_task_waiting_for_a_node_gives_its_group_slot_to_the_next_one() {
    let on_gpu = |spec: TaskSpec| TaskSpec {
        on: vec!["gpu".into()],
        ..spec
    };
    let offers = vec![
        NodeOffer {
            name: "a".into(),
            capacity: 1,
            labels: vec!["gpu".into()],
        },
        NodeOffer {
            name: "b".into(),
            capacity: 4,
            labels: Vec::new(),
        },
    ];
    let mut h = Harness::on(Nodes::cluster(offers));
    h.add_group("deploy", Some(1));
    // The gpu node is busy with another group's task; deploy runs one on b.
    let (_, busy) = h.submit(vec![on_gpu(task())]);
    let (_, running) = h.submit(vec![in_group("deploy")]);
    assert_eq!(h.status(busy[0]), Running);
    assert_eq!(h.status(running[0]), Running);
    // A deploy task that needs the gpu node, then a plain one held by the limit.
    let (_, gpu) = h.submit(vec![TaskSpec {
        priority: 5,
        ..on_gpu(in_group("deploy"))
    }]);
    let (_, plain) = h.submit(vec![in_group("deploy")]);
    // Deploy's task ends: the gpu task still has no node; the plain one takes the slot.
    let step = h.exit(running[0], 0);
    assert_eq!(step.launched(), plain);
    assert_eq!(h.status(gpu[0]), Queued);
}

#[test]
fn a_queue_resume_leaves_a_paused_group_paused() {
    let mut h = Harness::new(4);
    h.add_group("deploy", None);
    let (_, ids) = h.submit(vec![in_group("deploy"), task()]);
    h.change(pause(Some("deploy"), false));
    h.change(pause(None, false));
    let step = h.change(resume(None)).0;
    assert_eq!(step.effects.pauses, vec![(ids[1], 1, false)]);
    assert!(h.paused(ids[0]), "its group is still paused");
}

#[test]
fn a_group_added_again_takes_back_its_tasks_from_the_default_group() {
    let mut h = Harness::new(4);
    h.add_group("deploy", None);
    h.change(pause(None, true));
    let (_, ids) = h.submit(vec![in_group("deploy")]);
    h.change(QueueChange::RemoveGroup {
        name: "deploy".into(),
    });
    h.change(pause(Some("default"), true));
    h.change(resume(None));
    assert_eq!(h.status(ids[0]), Queued, "held by the paused default group");
    let step = h
        .change(QueueChange::AddGroup {
            name: "deploy".into(),
            parallel: None,
        })
        .0;
    assert_eq!(step.launched(), ids);
}
