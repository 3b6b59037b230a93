//! Live work only in memory: queued tasks held by their priority once durable and read
//! back when they start, finished ones let go of and read from the store when needed,
//! and nothing let go of before the last step that changed it is durable.

use orch_protocol::TaskStatus::{Blocked, Cancelled, DependencyFailed, Failed, Queued, Running};

use super::*;

#[test]
fn durable_queued_tasks_are_held_by_priority_and_start_in_order_from_their_records() {
    let mut h = Harness::new(1);
    let (step, ids) = h.submit(vec![with_priority(0), with_priority(5), with_priority(0)]);
    assert_eq!(step.launched(), vec![2]);
    assert_eq!(
        h.state.held(),
        (1, 2),
        "only the running task is held in full"
    );
    let step = h.exit(2, 0);
    assert_eq!(step.launched(), vec![1]);
    assert_eq!(
        step.effects.launches[0].spec,
        task(),
        "the spec read from the store"
    );
    assert_eq!(h.exit(1, 0).launched(), vec![3]);
    h.exit(3, 0);
    assert_eq!(h.state.held(), (0, 0), "finished tasks are let go of");
    for id in ids {
        assert_eq!(h.task(id).state.status(), TaskStatus::Succeeded);
    }
}

#[test]
fn a_dependency_that_was_let_go_of_is_read_from_the_store() {
    let mut h = Harness::new(1);
    h.submit(vec![task(), task()]);
    h.exit(1, 0);
    h.exit(2, 1);
    assert_eq!(h.state.held(), (0, 0));
    let (step, _) = h.submit(vec![
        after(&[1]),
        after(&[2]),
        TaskSpec {
            soft_after: vec![2],
            ..task()
        },
    ]);
    assert_eq!(
        step.written(),
        vec![
            (3, Queued),
            (4, DependencyFailed),
            (5, Queued),
            (3, Running)
        ]
    );
    let (_, error) = h.submit_refused(vec![after(&[99])]);
    assert!(
        error.message.contains("does not exist"),
        "{}",
        error.message
    );
}

#[test]
fn a_retry_reads_the_task_and_the_dependants_it_failed_from_the_store() {
    let mut h = Harness::new(1);
    h.submit(vec![task(), after(&[1]), after(&[2])]);
    let step = h.exit(1, 1);
    assert_eq!(
        step.written(),
        vec![(1, Failed), (2, DependencyFailed), (3, DependencyFailed)]
    );
    assert_eq!(h.state.held(), (0, 0));
    let (step, mut answer) = h.retry(1);
    assert_eq!(answer.value().id, 1);
    assert_eq!(
        step.written(),
        vec![(1, Queued), (2, Blocked), (3, Blocked), (1, Running)]
    );
    h.exit(1, 0);
    h.exit(2, 0);
    h.exit(3, 0);
    assert_eq!(h.task(3).state.status(), TaskStatus::Succeeded);
}

#[test]
fn a_task_is_held_until_the_last_step_that_changed_it_is_durable() {
    let mut h = Harness::new(1);
    h.submit(vec![task()]);
    // Submitted (and queued behind 1) in one step, cancelled in the next; the first is
    // durable before the second.
    let (reply, _first) = oneshot::channel();
    h.state.handle(
        Input::Request(Command::Submit {
            actor: actor(),
            specs: vec![task()],
            stashed: false,
            reply,
        }),
        h.now,
    );
    let mut submitted = h.state.end_turn(h.now);
    let (reply, _second) = oneshot::channel();
    h.state.handle(
        Input::Request(Command::Cancel {
            actor: actor(),
            id: 2,
            reply,
        }),
        h.now,
    );
    let mut cancelled = h.state.end_turn(h.now);
    assert_eq!(cancelled.written(), vec![(2, Cancelled)]);
    h.settle(&mut submitted);
    assert!(
        h.state.tasks.contains_key(&2),
        "its cancel is not durable yet: the store still says queued"
    );
    h.settle(&mut cancelled);
    assert!(!h.state.tasks.contains_key(&2) && !h.state.cold.contains_key(&2));
}

#[test]
fn a_cancel_of_a_queued_task_held_by_priority_reads_its_record() {
    let mut h = Harness::new(1);
    h.submit(vec![task(), task()]);
    assert_eq!(h.state.held(), (1, 1));
    let (step, mut answer) = h.cancel(2);
    assert_eq!(answer.value().state.status(), Cancelled);
    assert_eq!(step.written(), vec![(2, Cancelled)]);
    assert!(
        h.exit(1, 0).launched().is_empty(),
        "the cancelled task never starts"
    );
}

#[test]
fn after_a_restart_queued_tasks_are_held_by_priority_and_run_in_order() {
    let mut h = Harness::new(1);
    let specs = (0..20).map(|i| with_priority(i % 3)).collect();
    h.submit(specs);
    let (mut h, _) = h.restarted(1, h.now);
    // Task 3 (priority 2) was running: interrupted, it failed for good.
    assert_eq!(h.state.held(), (0, 19));
    let mut order = Vec::new();
    let mut step = h.turn(vec![]);
    while let Some(id) = step.launched().first().copied() {
        order.push(id);
        step = h.exit(id, 0);
    }
    let mut expected: Vec<TaskId> = (1..=20).filter(|id| *id != 3).collect();
    expected.sort_by_key(|id| (-((*id as i32 - 1) % 3), *id));
    assert_eq!(order, expected);
}

#[test]
fn a_task_the_open_step_changed_is_not_let_go_by_an_earlier_commit() {
    // The dependant is released in the same turn as the notice that its own submission
    // is durable arrives: its stored record still says `blocked`, so it must stay held
    // (let go, it would be read back as blocked and dropped from the queue for good).
    let mut h = Harness::new(2);
    let (_, first) = h.submit(vec![task()]);
    let (reply, _answer) = oneshot::channel();
    let submit = Command::Submit {
        actor: actor(),
        specs: vec![after(&first)],
        stashed: false,
        reply,
    };
    h.state.handle(Input::Request(submit), h.now);
    let pending = h.state.end_turn(h.now);
    h.stored.apply(&pending);
    let dependant = first[0] + 1;
    let attempt = h.running_attempt(first[0]);
    let exit = Report {
        id: first[0],
        attempt,
        kind: exited(0),
    };
    let committed = Input::Committed {
        step: pending.effects.settled.expect("the submission is a step"),
    };
    let step = h.turn(vec![Input::Report(exit), committed]);
    assert_eq!(step.launched(), vec![dependant]);
}
