//! Stash, enqueue and edit: a stashed task never starts until it is enqueued, and then
//! waits as a submission would have made it; an edit of a task that has not started
//! changes its spec (and, through new dependencies, its state) in one write and one
//! event; refusals change nothing.

use orch_protocol::TaskStatus::{Blocked, Cancelled, Delayed, Queued, Running, Stashed};
use orch_protocol::{ErrorKind, TaskChange, TaskEdit, TaskKind};

use super::*;

impl Harness {
    /// Asks for `change` of task `id`.
    fn change_task(&mut self, id: TaskId, change: TaskChange) -> (Step, Answered<Task>) {
        self.ask(|reply| Command::ChangeTask {
            actor: actor(),
            id,
            change,
            reply,
        })
    }

    /// Submits tasks stashed; returns the step and their ids.
    fn submit_stashed(&mut self, specs: Vec<TaskSpec>) -> (Step, Vec<TaskId>) {
        let (step, mut answer) = self.ask(|reply| Command::Submit {
            actor: actor(),
            specs,
            stashed: true,
            reply,
        });
        (step, answer.value().iter().map(|t| t.id).collect())
    }

    fn edit(&mut self, id: TaskId, edit: TaskEdit) -> (Step, Answered<Task>) {
        self.change_task(id, TaskChange::Edit(edit))
    }

    fn enqueue(&mut self, id: TaskId) -> (Step, Answered<Task>) {
        self.change_task(id, TaskChange::Enqueue { not_before: None })
    }
}

/// An edit of the priority alone.
fn priority(priority: i32) -> TaskEdit {
    TaskEdit {
        priority: Some(priority),
        ..TaskEdit::default()
    }
}

/// An edit of the dependencies alone.
fn depending_on(after: &[TaskId]) -> TaskEdit {
    TaskEdit {
        after: Some(after.to_vec()),
        ..TaskEdit::default()
    }
}

#[test]
fn a_stashed_task_starts_only_once_enqueued_and_survives_a_restart() {
    let mut h = Harness::new(2);
    let (step, ids) = h.submit_stashed(vec![task()]);
    let id = ids[0];
    assert_eq!(step.written(), vec![(id, Stashed)]);
    assert!(step.launched().is_empty());
    assert!(
        !h.state.tasks.contains_key(&id),
        "a stashed task is not held"
    );
    let (mut h, step) = h.restarted(2, h.now);
    assert!(step.launched().is_empty());
    assert_eq!(h.status(id), Stashed);
    let (step, mut answer) = h.enqueue(id);
    assert_eq!(step.written(), vec![(id, Queued), (id, Running)]);
    assert_eq!(step.events(), events(&[(id, "enqueued"), (id, "started")]));
    assert_eq!(
        answer.value().state.status(),
        Queued,
        "as the change left it"
    );
}

#[test]
fn stash_takes_a_queued_task_out_of_the_queue_and_enqueue_puts_it_back() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![task(), task(), task()]);
    let (first, second, third) = (ids[0], ids[1], ids[2]);
    let (step, mut answer) = h.change_task(second, TaskChange::Stash);
    assert_eq!(step.written(), vec![(second, Stashed)]);
    assert_eq!(answer.value().state.status(), Stashed);
    assert_eq!(
        h.exit(first, 0).launched(),
        vec![third],
        "the stashed task was passed over"
    );
    let (step, _) = h.enqueue(second);
    assert_eq!(step.written(), vec![(second, Queued)]);
    assert!(step.launched().is_empty(), "the slot is taken");
    assert_eq!(h.exit(third, 0).launched(), vec![second]);
    assert_eq!(
        h.exit(second, 0).launched(),
        Vec::<TaskId>::new(),
        "it ran once"
    );
}

#[test]
fn a_stashed_task_waits_for_its_dependencies_and_start_time_once_enqueued() {
    let mut h = Harness::new(2);
    let (_, first) = h.submit(vec![task()]);
    let (_, ids) = h.submit_stashed(vec![after(&first)]);
    let id = ids[0];
    let (step, _) = h.enqueue(id);
    assert_eq!(step.written(), vec![(id, Blocked)]);
    let later = h.now + chrono::Duration::seconds(30);
    h.exit(first[0], 0);
    let (_, stashed) = h.submit_stashed(vec![task()]);
    let (step, mut answer) = h.change_task(
        stashed[0],
        TaskChange::Enqueue {
            not_before: Some(later),
        },
    );
    assert_eq!(step.written(), vec![(stashed[0], Delayed)]);
    assert_eq!(answer.value().spec.not_before, Some(later));
    assert_eq!(step.effects.timers[0].due, later);
}

#[test]
fn what_a_stashed_task_waits_for_is_not_cleaned_away() {
    let mut h = Harness::new(2);
    let (_, failing) = h.submit(vec![task()]);
    h.exit(failing[0], 1);
    let (_, ids) = h.submit_stashed(vec![after(&failing)]);
    let rule = crate::engine::Rule {
        keep: crate::engine::Keep::For(std::time::Duration::ZERO),
        labels: Default::default(),
        only_label: None,
        status: Vec::new(),
        workflows: false,
        limit: 100,
        retention: false,
    };
    let (step, _) = h.ask(|reply| Command::Clean {
        actor: actor(),
        rule,
        reply,
    });
    assert!(
        step.batch.removals.is_empty(),
        "the failed dependency stays"
    );
    let error = h.enqueue(ids[0]).1.error();
    assert_eq!(error.kind, ErrorKind::Conflict);
    assert!(
        error.message.contains("would never run"),
        "{}",
        error.message
    );
    assert_eq!(
        h.status(ids[0]),
        Stashed,
        "a refused enqueue changes nothing"
    );
}

#[test]
fn a_cancel_of_a_stashed_task_fails_what_depends_on_it() {
    let mut h = Harness::new(2);
    let (_, stashed) = h.submit_stashed(vec![task()]);
    let (_, dependant) = h.submit(vec![after(&stashed)]);
    assert_eq!(h.status(dependant[0]), Blocked);
    let (step, _) = h.cancel(stashed[0]);
    assert_eq!(step.written()[0], (stashed[0], Cancelled));
    assert_eq!(h.status(dependant[0]), TaskStatus::DependencyFailed);
}

#[test]
fn an_edited_priority_reorders_the_queue_in_memory_and_in_the_store() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![task(), task(), task()]);
    let (running, second, third) = (ids[0], ids[1], ids[2]);
    let (step, mut answer) = h.edit(third, priority(5));
    assert_eq!(step.written(), vec![(third, Queued)]);
    let write = &step.batch.tasks[0];
    assert_eq!(write.previous, Some(Queued));
    let before = write.reindex.clone().expect("the indexes move");
    assert_eq!(before.priority, 0);
    assert_eq!(step.events(), events(&[(third, "edited")]));
    assert_eq!(answer.value().spec.priority, 5);
    assert_eq!(h.exit(running, 0).launched(), vec![third]);
    assert_eq!(h.exit(third, 0).launched(), vec![second]);
    assert!(
        h.exit(second, 0).launched().is_empty(),
        "no stale entry starts a task twice"
    );
}

#[test]
fn a_lowered_priority_leaves_no_entry_at_the_old_one() {
    let mut h = Harness::new(1);
    let (_, running) = h.submit(vec![task()]);
    let (_, ids) = h.submit(vec![with_priority(5), task()]);
    let (running, lowered, other) = (running[0], ids[0], ids[1]);
    h.edit(lowered, priority(-1));
    assert_eq!(h.exit(running, 0).launched(), vec![other]);
    assert_eq!(h.exit(other, 0).launched(), vec![lowered]);
}

#[test]
fn new_dependencies_block_a_queued_task_and_removing_them_releases_a_blocked_one() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![task(), task()]);
    let (running, queued) = (ids[0], ids[1]);
    let (step, mut answer) = h.edit(queued, depending_on(&[running]));
    assert_eq!(step.written(), vec![(queued, Blocked)]);
    let event = &step.batch.events[0].kind;
    assert!(
        matches!(event, orch_protocol::EventKind::Edited { status: Blocked, fields } if fields == &["after"]),
        "{event:?}"
    );
    assert_eq!(answer.value().spec.after, vec![running]);
    let (step, _) = h.edit(queued, depending_on(&[]));
    assert_eq!(step.written(), vec![(queued, Queued)]);
    // Blocked again, then released by its dependency's success, once.
    h.edit(queued, depending_on(&[running]));
    let step = h.exit(running, 0);
    assert_eq!(
        step.written(),
        vec![
            (running, TaskStatus::Succeeded),
            (queued, Queued),
            (queued, Running)
        ]
    );
}

#[test]
fn a_blocked_task_edited_to_wait_for_another_task_is_released_by_that_one_only() {
    let mut h = Harness::new(3);
    let (_, gates) = h.submit(vec![
        TaskSpec::command("sleep", vec!["9".into()]),
        TaskSpec::command("sleep", vec!["9".into()]),
    ]);
    let (_, ids) = h.submit(vec![after(&[gates[0]])]);
    let id = ids[0];
    h.edit(id, depending_on(&[gates[1]]));
    let step = h.exit(gates[0], 0);
    assert_eq!(
        step.written(),
        vec![(gates[0], TaskStatus::Succeeded)],
        "no longer its dependency"
    );
    assert_eq!(h.exit(gates[1], 0).launched(), vec![id]);
}

#[test]
fn an_edit_replaces_what_runs_and_its_label() {
    let mut h = Harness::new(1);
    let (_, stashed) = h.submit_stashed(vec![TaskSpec {
        label: Some("old".into()),
        ..task()
    }]);
    let id = stashed[0];
    let edit = TaskEdit {
        kind: Some(TaskKind::Command {
            program: "echo".into(),
            args: vec!["new".into()],
        }),
        label: Some(None),
        ..TaskEdit::default()
    };
    let (step, mut answer) = h.edit(id, edit);
    assert_eq!(
        step.written(),
        vec![(id, Stashed)],
        "a stashed task stays stashed"
    );
    assert_eq!(
        step.batch.tasks[0]
            .reindex
            .as_ref()
            .unwrap()
            .label
            .as_deref(),
        Some("old")
    );
    let task = answer.value();
    assert_eq!(task.spec.label, None);
    assert_eq!(task.spec.describe(), "echo new");
    assert_eq!(h.enqueue(id).0.launched(), vec![id]);
    assert_eq!(h.task(id).spec.describe(), "echo new");
}

#[test]
fn refusals_name_the_problem_and_change_nothing() {
    let mut h = Harness::new(1);
    let (_, ids) = h.submit(vec![task(), task()]);
    let (running, queued) = (ids[0], ids[1]);
    let refused = |h: &mut Harness, id, change| {
        let (step, mut answer) = h.change_task(id, change);
        assert!(step.batch.tasks.is_empty() && step.batch.events.is_empty());
        assert_eq!(step.batch.audit.len(), 1, "the refusal is audited");
        answer.error()
    };
    let error = refused(&mut h, running, TaskChange::Stash);
    assert!(error.message.contains("is running"), "{}", error.message);
    let error = refused(&mut h, queued, TaskChange::Enqueue { not_before: None });
    assert!(error.message.contains("not stashed"), "{}", error.message);
    let error = refused(&mut h, queued, TaskChange::Edit(TaskEdit::default()));
    assert_eq!(error.field.as_deref(), Some("change"));
    let error = refused(&mut h, queued, TaskChange::Edit(depending_on(&[queued])));
    assert_eq!(error.field.as_deref(), Some("after"));
    assert!(
        error.message.contains("submitted before it"),
        "{}",
        error.message
    );
    let error = refused(
        &mut h,
        queued,
        TaskChange::Edit(depending_on(&[queued + 1])),
    );
    assert_eq!(error.field.as_deref(), Some("after"));
    let blank = TaskEdit {
        kind: Some(TaskKind::Command {
            program: " ".into(),
            args: Vec::new(),
        }),
        ..TaskEdit::default()
    };
    let error = refused(&mut h, queued, TaskChange::Edit(blank));
    assert_eq!(error.field.as_deref(), Some("command"));
    assert!(
        error.message.starts_with(&format!("task {queued}:")),
        "{}",
        error.message
    );
    let error = refused(&mut h, 999, TaskChange::Stash);
    assert_eq!(error.kind, ErrorKind::NotFound);
    let far = h.now + chrono::Duration::days(400);
    h.change_task(queued, TaskChange::Stash);
    let error = refused(
        &mut h,
        queued,
        TaskChange::Enqueue {
            not_before: Some(far),
        },
    );
    assert_eq!(error.field.as_deref(), Some("not_before"));
    let error = refused(&mut h, queued, TaskChange::Stash);
    assert!(
        error.message.contains("already stashed"),
        "{}",
        error.message
    );
}

#[test]
fn a_workflow_step_is_not_changed_here() {
    let mut h = Harness::new(1);
    let (_, workflow) = h.submit_workflow(chain());
    let step_b = h.step_task(workflow.id, "b");
    let error = h.change_task(step_b, TaskChange::Stash).1.error();
    assert!(error.message.contains("workflow"), "{}", error.message);
}

#[test]
fn a_group_releases_an_edited_task_at_its_new_priority() {
    let mut h = Harness::new(4);
    h.change(orch_protocol::QueueChange::Parallel {
        group: None,
        limit: 1,
    });
    let (_, running) = h.submit(vec![task()]);
    let (_, held) = h.submit(vec![with_priority(10), with_priority(5)]);
    let (lowered, other) = (held[0], held[1]);
    h.edit(lowered, priority(0));
    assert_eq!(h.exit(running[0], 0).launched(), vec![other]);
    assert_eq!(h.exit(other, 0).launched(), vec![lowered]);
    assert!(h.exit(lowered, 0).launched().is_empty());
}

#[test]
fn repeated_dependencies_of_an_edit_are_counted_once() {
    let mut h = Harness::new(1);
    let (_, gate) = h.submit(vec![task()]);
    let (_, ids) = h.submit_stashed(vec![task()]);
    let (step, mut answer) = h.edit(ids[0], depending_on(&[gate[0], gate[0]]));
    assert_eq!(answer.value().spec.after, gate);
    assert_eq!(step.events(), events(&[(ids[0], "edited")]));
    let (_, queued) = h.submit(vec![task()]);
    let (_, mut edited) = h.edit(queued[0], depending_on(&[ids[0], ids[0]]));
    let waiting_on = vec![ids[0]];
    assert_eq!(edited.value().state, TaskState::Blocked { waiting_on });
}
