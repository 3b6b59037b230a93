//! Conformance cases for task records: lists and their cursors, the queue order, the
//! status index, removals, the highest id, merged writes and a big batch.

use std::collections::HashMap;

use chrono::Utc;
use orch_protocol::{Task, TaskFilter, TaskState, TaskStatus, WorkflowState};

use super::{
    Fixture, change, counts, ids, queued, running, submit, succeeded, task, test_env, with_status,
    workflow,
};
use crate::store::{Indexed, Store, TaskWrite, WriteBatch};

/// Tasks 1..=10: odd ones queued, even ones running; those divisible by 3 labelled.
fn ten_tasks(store: &dyn Store) {
    let tasks = (1..=10u64)
        .map(|id| {
            let state = if id % 2 == 1 { queued() } else { running() };
            let mut task = task(id, 0, state);
            task.spec.label = (id % 3 == 0).then(|| "three".to_string());
            task
        })
        .collect();
    submit(store, tasks);
}

/// Every page of `filter` with pages of `size`, each below the last id of the one before.
fn pages(store: &dyn Store, mut filter: TaskFilter, size: usize) -> Vec<Vec<u64>> {
    filter.limit = Some(size);
    let mut pages = Vec::new();
    loop {
        let page = ids(&store.list(&filter).unwrap());
        if page.is_empty() {
            return pages;
        }
        filter.before = page.last().copied();
        pages.push(page);
    }
}

/// Lists page newest first below the cursor, with every kind of filter.
pub(crate) fn lists_page_newest_first_below_the_cursor_with_every_filter(fixture: &dyn Fixture) {
    let store = fixture.open();
    let store = store.as_ref();
    ten_tasks(store);
    let all = TaskFilter::default();
    let expected = vec![vec![10, 9, 8, 7], vec![6, 5, 4, 3], vec![2, 1]];
    assert_eq!(pages(store, all, 4), expected);
    let both = with_status(&[TaskStatus::Queued, TaskStatus::Running]);
    let expected = vec![vec![10, 9, 8], vec![7, 6, 5], vec![4, 3, 2], vec![1]];
    assert_eq!(pages(store, both, 3), expected);
    let queued = with_status(&[TaskStatus::Queued]);
    assert_eq!(
        pages(store, queued, 2),
        vec![vec![9, 7], vec![5, 3], vec![1]]
    );
    let labelled_queued = TaskFilter {
        label: Some("three".into()),
        ..with_status(&[TaskStatus::Queued])
    };
    assert_eq!(pages(store, labelled_queued, 1), vec![vec![9], vec![3]]);
    let labelled = TaskFilter {
        label: Some("three".into()),
        ..TaskFilter::default()
    };
    assert_eq!(ids(&store.list(&labelled).unwrap()), vec![9, 6, 3]);
    let below_one = TaskFilter {
        before: Some(1),
        ..TaskFilter::default()
    };
    assert!(store.list(&below_one).unwrap().is_empty());
    let none = TaskFilter {
        limit: Some(0),
        ..TaskFilter::default()
    };
    assert!(store.list(&none).unwrap().is_empty());
    assert!(
        store
            .list(&with_status(&[TaskStatus::Failed]))
            .unwrap()
            .is_empty()
    );
}

/// The queue is by priority, highest first, then by id; a task leaving it leaves the order.
pub(crate) fn the_queue_is_by_priority_then_submission(fixture: &dyn Fixture) {
    let store = fixture.open();
    let priorities = [(1, 0), (2, 10), (3, -5), (4, 10), (5, 0), (6, 3)];
    let tasks = priorities.iter().map(|&(id, p)| task(id, p, queued()));
    submit(store.as_ref(), tasks.collect());
    let queue = store.load().unwrap().queue;
    assert_eq!(
        queue,
        vec![(2, 10), (4, 10), (6, 3), (1, 0), (5, 0), (3, -5)]
    );
    change(store.as_ref(), task(4, 10, running()), TaskStatus::Queued);
    let queue = store.load().unwrap().queue;
    assert_eq!(queue, vec![(2, 10), (6, 3), (1, 0), (5, 0), (3, -5)]);
}

/// `statuses` reads a range of ids; `scan_status` reads one status, oldest first.
pub(crate) fn statuses_and_scans_come_from_the_status_index(fixture: &dyn Fixture) {
    let store = fixture.open();
    ten_tasks(store.as_ref());
    let statuses = store.statuses(4..=7).unwrap();
    let expected: HashMap<u64, TaskStatus> = [
        (4, TaskStatus::Running),
        (5, TaskStatus::Queued),
        (6, TaskStatus::Running),
        (7, TaskStatus::Queued),
    ]
    .into();
    assert_eq!(statuses, expected);
    assert_eq!(store.statuses(11..=u64::MAX).unwrap(), HashMap::new());
    let mut scanned = Vec::new();
    store
        .scan_status(TaskStatus::Running, &mut |t| scanned.push(t.id))
        .unwrap();
    assert_eq!(scanned, vec![2, 4, 6, 8, 10]);
    let mut none = 0;
    store
        .scan_status(TaskStatus::Failed, &mut |_| none += 1)
        .unwrap();
    assert_eq!(none, 0);
}

/// Removing finished tasks updates the counts, the indexes and the lists.
pub(crate) fn removals_update_the_counts_and_the_indexes(fixture: &dyn Fixture) {
    let store = fixture.open();
    ten_tasks(store.as_ref());
    let done = |id| {
        let mut t = task(id, 0, succeeded());
        t.spec.label = (id % 3 == 0).then(|| "three".to_string());
        t
    };
    for id in [6, 8] {
        change(store.as_ref(), done(id), TaskStatus::Running);
    }
    let counts_before = counts(store.as_ref());
    let finished = done(6).state.status();
    assert_eq!(counts_before[&finished], 2);
    let batch = WriteBatch {
        removals: vec![done(6), done(8)],
        ..WriteBatch::default()
    };
    store.commit(&batch).unwrap();
    let after = counts(store.as_ref());
    assert_eq!(after[&finished], 0);
    assert_eq!(after[&TaskStatus::Running], 3);
    assert!(store.get(6).unwrap().is_none());
    assert!(store.list(&with_status(&[finished])).unwrap().is_empty());
    let labelled = TaskFilter {
        label: Some("three".into()),
        ..TaskFilter::default()
    };
    assert_eq!(ids(&store.list(&labelled).unwrap()), vec![9, 3]);
    assert!(!store.statuses(1..=10).unwrap().contains_key(&8));
    assert_eq!(store.load().unwrap().last_task_id, 10);
}

/// The highest id counts workflows and test environments, and outlives removals;
/// workflow counts follow their status and their removal.
pub(crate) fn the_last_id_counts_workflows_and_test_envs_and_outlives_removals(
    fixture: &dyn Fixture,
) {
    let store = fixture.open();
    submit(
        store.as_ref(),
        vec![task(1, 0, queued()), task(2, 0, running())],
    );
    let running = WorkflowState::Running { since: Utc::now() };
    let env = test_env(9);
    let batch = WriteBatch {
        workflows: vec![
            workflow(5, &[2], running.clone()),
            workflow(7, &[], running),
        ],
        test_envs: vec![env],
        ..WriteBatch::default()
    };
    store.commit(&batch).unwrap();
    let snapshot = store.load().unwrap();
    assert_eq!(snapshot.last_task_id, 9);
    assert_eq!(
        snapshot.workflows.iter().map(|w| w.id).collect::<Vec<_>>(),
        vec![5, 7]
    );
    assert_eq!(
        snapshot.test_envs.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![9]
    );
    assert_eq!(ids(&snapshot.tasks), vec![2]);
    let wf_counts = store.count_workflows_by_status().unwrap();
    assert_eq!(wf_counts, vec![("running".to_string(), 2)]);
    let done = WorkflowState::Succeeded {
        finished_at: Utc::now(),
    };
    let batch = WriteBatch {
        workflows: vec![workflow(7, &[], done)],
        workflow_removals: vec![5],
        ..WriteBatch::default()
    };
    store.commit(&batch).unwrap();
    let wf_counts = store.count_workflows_by_status().unwrap();
    let expected = vec![("running".to_string(), 0), ("succeeded".to_string(), 1)];
    assert_eq!(wf_counts, expected);
    assert!(store.workflow(5).unwrap().is_none());
    assert_eq!(store.workflow(7).unwrap().map(|w| w.id), Some(7));
    let newest: Vec<u64> = store
        .workflows(None, 10)
        .unwrap()
        .iter()
        .map(|w| w.id)
        .collect();
    assert_eq!(newest, vec![7]);
    let page = |before, limit| -> Vec<u64> {
        let page = store.workflows(before, limit).unwrap();
        page.iter().map(|w| w.id).collect()
    };
    assert_eq!(page(Some(7), 10), Vec::<u64>::new());
    assert_eq!(page(Some(8), 10), vec![7]);
    assert_eq!(page(None, 0), Vec::<u64>::new());
    assert_eq!(store.load().unwrap().last_task_id, 9);
}

/// Batches merged by the group committer may write one task several times: the record is
/// the last write, the counts follow each step.
pub(crate) fn several_writes_of_one_task_in_a_batch_count_as_their_sequence(fixture: &dyn Fixture) {
    let store = fixture.open();
    let mut batch = WriteBatch::default();
    batch.tasks.push(TaskWrite {
        task: task(1, 0, queued()),
        previous: None,
        reindex: None,
    });
    batch.tasks.push(TaskWrite {
        task: task(1, 0, running()),
        previous: Some(TaskStatus::Queued),
        reindex: None,
    });
    store.commit(&batch).unwrap();
    let counts = counts(store.as_ref());
    assert_eq!(
        (counts[&TaskStatus::Queued], counts[&TaskStatus::Running]),
        (0, 1)
    );
    assert_eq!(
        store.get(1).unwrap().map(|t| t.state.status()),
        Some(TaskStatus::Running)
    );
    assert!(store.load().unwrap().queue.is_empty());
    assert_eq!(
        ids(&store.list(&with_status(&[TaskStatus::Running])).unwrap()),
        vec![1]
    );
}

/// Ten thousand new tasks in one batch: one commit, every index and count up to date.
pub(crate) fn a_batch_of_ten_thousand_tasks_is_one_commit(fixture: &dyn Fixture) {
    let store = fixture.open();
    let name = store.backend_name();
    let tasks: Vec<Task> = (1..=10_000)
        .map(|id| task(id, (id % 7) as i32, queued()))
        .collect();
    let started = std::time::Instant::now();
    submit(store.as_ref(), tasks);
    let bulk = started.elapsed();
    let started = std::time::Instant::now();
    for id in 10_001..=10_050 {
        submit(store.as_ref(), vec![task(id, 0, queued())]);
    }
    let one = started.elapsed() / 50;
    eprintln!(
        "{name}: a 10000-task batch committed in {bulk:?}, a one-task batch in {one:?} (mean of 50)"
    );
    assert_eq!(counts(store.as_ref())[&TaskStatus::Queued], 10_050);
    let queue = store.load().unwrap().queue;
    assert_eq!(queue.len(), 10_050);
    assert_eq!(queue[0], (6, 6));
    let newest = TaskFilter {
        limit: Some(3),
        ..with_status(&[TaskStatus::Queued])
    };
    let listed = ids(&store.list(&newest).unwrap());
    assert_eq!(listed, vec![10_050, 10_049, 10_048]);
}

/// The start-up snapshot holds the unfinished tasks of [`crate::store::HELD`] in full
/// (delayed ones among them), the queued ones by id only, and no finished one.
pub(crate) fn the_snapshot_holds_the_unfinished_tasks_but_the_queued_ones(fixture: &dyn Fixture) {
    {
        let store = fixture.open();
        let now = chrono::Utc::now();
        submit(
            store.as_ref(),
            vec![
                task(
                    1,
                    0,
                    TaskState::Blocked {
                        waiting_on: vec![5],
                    },
                ),
                task(2, 0, TaskState::Delayed { until: now }),
                task(3, 0, running()),
                task(
                    4,
                    0,
                    TaskState::RetryWaiting {
                        next_attempt: 2,
                        retry_at: now,
                    },
                ),
                task(5, 0, queued()),
                task(6, 0, TaskState::Succeeded { finished_at: now }),
            ],
        );
    }
    let snapshot = fixture.open().load().unwrap();
    let mut held: Vec<(u64, TaskStatus)> = snapshot
        .tasks
        .iter()
        .map(|t| (t.id, t.state.status()))
        .collect();
    held.sort();
    assert_eq!(
        held,
        vec![
            (1, TaskStatus::Blocked),
            (2, TaskStatus::Delayed),
            (3, TaskStatus::Running),
            (4, TaskStatus::RetryWaiting),
        ]
    );
    assert_eq!(snapshot.queue, vec![(5, 0)]);
}

/// An edit's write moves the queue and label indexes from the fields it had (`reindex`),
/// whether the status stays or changes with it, and in one batch with the task's creation.
pub(crate) fn an_edit_moves_the_queue_and_label_indexes(fixture: &dyn Fixture) {
    let store = fixture.open();
    let labelled = |id, priority, label: Option<&str>, state| {
        let mut task = task(id, priority, state);
        task.spec.label = label.map(str::to_string);
        task
    };
    let edit = |task: Task, previous, priority, label: Option<&str>| TaskWrite {
        task,
        previous: Some(previous),
        reindex: Some(Indexed {
            priority,
            label: label.map(str::to_string),
        }),
    };
    submit(
        store.as_ref(),
        vec![
            labelled(1, 0, Some("old"), queued()),
            labelled(2, 5, None, queued()),
        ],
    );
    // Task 1: priority 0 → 9, label old → new; task 2: blocked by its edit, from 5.
    // Task 3: created and edited in one batch (as merged steps write it).
    let blocked = TaskState::Blocked {
        waiting_on: vec![1],
    };
    let batch = WriteBatch {
        tasks: vec![
            edit(
                labelled(1, 9, Some("new"), queued()),
                TaskStatus::Queued,
                0,
                Some("old"),
            ),
            edit(
                labelled(2, 5, Some("b"), blocked),
                TaskStatus::Queued,
                5,
                None,
            ),
            TaskWrite {
                task: labelled(3, 1, Some("old"), queued()),
                previous: None,
                reindex: None,
            },
            edit(
                labelled(3, 2, None, queued()),
                TaskStatus::Queued,
                1,
                Some("old"),
            ),
        ],
        ..WriteBatch::default()
    };
    store.commit(&batch).unwrap();
    let check = |store: &dyn Store| {
        assert_eq!(store.load().unwrap().queue, vec![(1, 9), (3, 2)]);
        let by_label = |label: &str| {
            let filter = TaskFilter {
                label: Some(label.into()),
                ..TaskFilter::default()
            };
            ids(&store.list(&filter).unwrap())
        };
        assert_eq!(by_label("old"), Vec::<u64>::new());
        assert_eq!(by_label("new"), vec![1]);
        assert_eq!(by_label("b"), vec![2]);
        let counts = counts(store);
        assert_eq!(
            (counts[&TaskStatus::Queued], counts[&TaskStatus::Blocked]),
            (2, 1)
        );
    };
    check(store.as_ref());
    drop(store);
    check(fixture.open().as_ref());
}
