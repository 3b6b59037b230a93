//! The behaviour every [`Store`] backend must have, as test cases over a [`Fixture`]; each
//! backend's tests run all of them through [`conformance_tests!`]. Task records, indexes,
//! counts and events are here; the audit log's cases in `audit`.

mod audit;

use std::collections::HashMap;
use std::path::Path;

use chrono::Utc;
use orch_protocol::{
    EnvRequest, EnvSpec, EnvState, Event, EventKind, Task, TaskFilter, TaskSpec, TaskState,
    TaskStatus, TestEnv, Workflow, WorkflowKind, WorkflowState, WorkflowStep,
};

use super::{Store, TaskWrite, WriteBatch};

pub(crate) use audit::{
    archiving_is_refused_when_the_log_changed_and_nothing_changes,
    audit_entries_are_sealed_in_order_onto_a_chain_that_verifies,
};

/// A store under test: each `open` opens the same data again (drop the last handle first).
pub(crate) trait Fixture {
    /// Opens (or reopens) the store.
    fn open(&self) -> Box<dyn Store>;
    /// A directory for the files that live beside the store (audit segments).
    fn data_dir(&self) -> &Path;
}

/// One `#[test]` per conformance case, each on a fresh fixture from `$fixture`.
macro_rules! conformance_tests {
    ($fixture:expr) => {
        $crate::store::conformance::conformance_tests!(@cases $fixture;
            indexes_follow_state_changes_and_survive_reopen,
            trimmed_events_are_gone_for_good_and_the_numbering_goes_on,
            lists_page_newest_first_below_the_cursor_with_every_filter,
            the_queue_is_by_priority_then_submission,
            statuses_and_scans_come_from_the_status_index,
            removals_update_the_counts_and_the_indexes,
            the_last_id_counts_workflows_and_test_envs_and_outlives_removals,
            several_writes_of_one_task_in_a_batch_count_as_their_sequence,
            a_batch_of_ten_thousand_tasks_is_one_commit,
            audit_entries_are_sealed_in_order_onto_a_chain_that_verifies,
            archiving_is_refused_when_the_log_changed_and_nothing_changes,
        );
    };
    (@cases $fixture:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                let fixture = $fixture;
                $crate::store::conformance::$case(&fixture);
            }
        )*
    };
}
pub(crate) use conformance_tests;

/// Task `id` with `priority` in `state`.
pub(crate) fn task(id: u64, priority: i32, state: TaskState) -> Task {
    let mut spec = TaskSpec::command("true", vec![]);
    spec.priority = priority;
    Task {
        id,
        spec,
        state,
        submitted_at: Utc::now(),
        attempts: vec![],
        attempts_before_retry: 0,
        progress: None,
    }
}

fn queued() -> TaskState {
    TaskState::Queued { since: Utc::now() }
}

fn running() -> TaskState {
    TaskState::Running {
        attempt: 1,
        started_at: Utc::now(),
    }
}

fn succeeded() -> TaskState {
    TaskState::Succeeded {
        finished_at: Utc::now(),
    }
}

/// New tasks, in one batch.
fn submit(store: &dyn Store, tasks: Vec<Task>) {
    let tasks = tasks
        .into_iter()
        .map(|task| TaskWrite {
            task,
            previous: None,
        })
        .collect();
    store
        .commit(&WriteBatch {
            tasks,
            ..WriteBatch::default()
        })
        .unwrap();
}

/// `task` moved from `previous` to its state.
fn change(store: &dyn Store, task: Task, previous: TaskStatus) {
    let batch = WriteBatch {
        tasks: vec![TaskWrite {
            task,
            previous: Some(previous),
        }],
        ..WriteBatch::default()
    };
    store.commit(&batch).unwrap();
}

fn counts(store: &dyn Store) -> HashMap<TaskStatus, u64> {
    store.count_by_status().unwrap().into_iter().collect()
}

fn ids(tasks: &[Task]) -> Vec<u64> {
    tasks.iter().map(|t| t.id).collect()
}

fn with_status(status: &[TaskStatus]) -> TaskFilter {
    TaskFilter {
        status: status.to_vec(),
        ..TaskFilter::default()
    }
}

/// Workflow `id` running `steps` (their task ids).
pub(crate) fn workflow(id: u64, steps: &[u64], state: WorkflowState) -> Workflow {
    Workflow {
        id,
        name: format!("workflow {id}"),
        kind: WorkflowKind::Batch,
        request: serde_json::Value::Null,
        submitted_at: Utc::now(),
        priority: 0,
        parallel_limit: None,
        rollback_enabled: false,
        steps: steps
            .iter()
            .map(|task| WorkflowStep {
                id: format!("step{task}"),
                description: String::new(),
                task: *task,
                dependencies: vec![],
                soft_dependencies: vec![],
                rollback: None,
            })
            .collect(),
        rollback_steps: vec![],
        state,
        last_event: 0,
        waves: None,
    }
}

/// Test environment `id`, created.
fn test_env(id: u64) -> TestEnv {
    let now = Utc::now();
    TestEnv {
        id,
        name: "redis".into(),
        kind: "single".into(),
        request: EnvRequest {
            env: EnvSpec::Single {
                taskserv: "redis".into(),
            },
            auto_start: true,
            auto_cleanup: false,
            ttl_ms: None,
            resources: None,
            image: None,
        },
        created_at: now,
        expires_at: now,
        network: String::new(),
        nodes: Vec::new(),
        state: EnvState::Created { at: now },
        probes: Vec::new(),
        results: Vec::new(),
        diagnostics: None,
    }
}

/// Indexes follow state changes, and survive a reopen.
pub(crate) fn indexes_follow_state_changes_and_survive_reopen(fixture: &dyn Fixture) {
    {
        let store = fixture.open();
        submit(
            store.as_ref(),
            vec![
                task(1, 0, queued()),
                task(2, 5, queued()),
                task(3, 0, queued()),
            ],
        );
        change(store.as_ref(), task(2, 5, running()), TaskStatus::Queued);
    }
    let store = fixture.open();
    let snapshot = store.load().unwrap();
    // Queued tasks are named by the queue index, not read; the running one is read.
    assert_eq!(ids(&snapshot.tasks), vec![2]);
    assert_eq!(snapshot.queue, vec![(1, 0), (3, 0)]);
    assert_eq!(snapshot.last_task_id, 3);
    let counts = counts(store.as_ref());
    assert_eq!(counts[&TaskStatus::Queued], 2);
    assert_eq!(counts[&TaskStatus::Running], 1);
    let listed = store.list(&with_status(&[TaskStatus::Queued])).unwrap();
    assert_eq!(ids(&listed), vec![3, 1]);
    assert_eq!(
        store.get(2).unwrap().map(|t| t.state.status()),
        Some(TaskStatus::Running)
    );
    assert!(store.get(4).unwrap().is_none());
}

/// Trimmed events stay gone, and the numbering goes on from them.
pub(crate) fn trimmed_events_are_gone_for_good_and_the_numbering_goes_on(fixture: &dyn Fixture) {
    let event = |seq| Event {
        seq,
        at: Utc::now(),
        task: 1,
        workflow: None,
        kind: EventKind::Queued,
    };
    let trim = |through| WriteBatch {
        events_removed_through: Some(through),
        ..WriteBatch::default()
    };
    {
        let store = fixture.open();
        let batch = WriteBatch {
            events: (1..=5).map(event).collect(),
            ..WriteBatch::default()
        };
        store.commit(&batch).unwrap();
        let after = |seq, limit| {
            let events = store.events_after(seq, limit).unwrap();
            events.iter().map(|e| e.seq).collect::<Vec<_>>()
        };
        assert_eq!(after(1, 2), vec![2, 3]);
        store.commit(&trim(3)).unwrap();
        assert_eq!(after(0, 10), vec![4, 5]);
        assert_eq!(store.last_event_seq().unwrap(), 5);
        store.commit(&trim(5)).unwrap();
        // A lower trim afterwards does not lower the mark.
        store.commit(&trim(2)).unwrap();
    }
    let store = fixture.open();
    assert!(store.events_after(0, 10).unwrap().is_empty());
    assert_eq!(store.events_removed_through().unwrap(), 5);
    assert_eq!(store.load().unwrap().last_event_seq, 5);
    assert_eq!(store.last_event_seq().unwrap(), 5);
}

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
    let newest: Vec<u64> = store.workflows(10).unwrap().iter().map(|w| w.id).collect();
    assert_eq!(newest, vec![7]);
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
    });
    batch.tasks.push(TaskWrite {
        task: task(1, 0, running()),
        previous: Some(TaskStatus::Queued),
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
    submit(store.as_ref(), vec![task(10_001, 0, queued())]);
    let one = started.elapsed();
    eprintln!("{name}: a 10000-task batch committed in {bulk:?}, a one-task batch in {one:?}");
    assert_eq!(counts(store.as_ref())[&TaskStatus::Queued], 10_001);
    let queue = store.load().unwrap().queue;
    assert_eq!(queue.len(), 10_001);
    assert_eq!(queue[0], (6, 6));
    let newest = TaskFilter {
        limit: Some(3),
        ..with_status(&[TaskStatus::Queued])
    };
    assert_eq!(
        ids(&store.list(&newest).unwrap()),
        vec![10_001, 10_000, 9_999]
    );
}
