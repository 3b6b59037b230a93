//! The behaviour every [`Store`] backend must have, as test cases over a [`Fixture`]; each
//! backend's tests run all of them through [`conformance_tests!`]. Task records, indexes,
//! counts and events are here (the first cases); lists, the queue, removals and big
//! batches in `tasks`; the audit log's cases in `audit`; a migration into the store and out
//! again in `migration`.

mod audit;
mod migration;
mod tasks;

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
pub(crate) use migration::a_store_migrated_into_this_one_and_out_again_is_the_same;
pub(crate) use tasks::{
    a_batch_of_ten_thousand_tasks_is_one_commit, an_edit_moves_the_queue_and_label_indexes,
    lists_page_newest_first_below_the_cursor_with_every_filter,
    removals_update_the_counts_and_the_indexes,
    several_writes_of_one_task_in_a_batch_count_as_their_sequence,
    statuses_and_scans_come_from_the_status_index,
    the_last_id_counts_workflows_and_test_envs_and_outlives_removals,
    the_queue_is_by_priority_then_submission,
    the_snapshot_holds_the_unfinished_tasks_but_the_queued_ones,
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
            the_snapshot_holds_the_unfinished_tasks_but_the_queued_ones,
            statuses_and_scans_come_from_the_status_index,
            removals_update_the_counts_and_the_indexes,
            the_last_id_counts_workflows_and_test_envs_and_outlives_removals,
            several_writes_of_one_task_in_a_batch_count_as_their_sequence,
            an_edit_moves_the_queue_and_label_indexes,
            a_batch_of_ten_thousand_tasks_is_one_commit,
            audit_entries_are_sealed_in_order_onto_a_chain_that_verifies,
            archiving_is_refused_when_the_log_changed_and_nothing_changes,
            a_store_migrated_into_this_one_and_out_again_is_the_same,
            the_queue_controls_are_stored_whole_and_default_until_then,
            records_by_name_are_written_and_removed_in_the_order_of_their_batches,
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
        paused_at: None,
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
            reindex: None,
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
            reindex: None,
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
                wave: Some(1),
            })
            .collect(),
        rollback_steps: vec![],
        state,
        last_event: 0,
        waves: None,
    }
}

/// Test environment `id`, created.
pub(crate) fn test_env(id: u64) -> TestEnv {
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
        node: None,
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

/// The queue's controls: the default ones until a batch stores some, then the last ones
/// stored, in the snapshot and on their own, across a reopen; a paused running task's
/// record keeps its pause.
pub(crate) fn the_queue_controls_are_stored_whole_and_default_until_then(fixture: &dyn Fixture) {
    use orch_protocol::{GroupSettings, QueueControls};
    let store = fixture.open();
    assert_eq!(store.queue_controls().unwrap(), QueueControls::default());
    assert_eq!(store.load().unwrap().controls, QueueControls::default());
    let mut controls = QueueControls {
        paused: true,
        ..QueueControls::default()
    };
    let deploy = GroupSettings {
        parallel: Some(2),
        paused: true,
    };
    controls.groups.insert("deploy".into(), deploy);
    let mut paused = task(1, 0, running());
    if let TaskState::Running { paused_at, .. } = &mut paused.state {
        *paused_at = Some(Utc::now());
    }
    paused.spec.group = Some("deploy".into());
    let batch = WriteBatch {
        controls: Some(controls.clone()),
        tasks: vec![TaskWrite {
            task: paused.clone(),
            previous: None,
            reindex: None,
        }],
        ..WriteBatch::default()
    };
    store.commit(&batch).unwrap();
    controls.paused = false;
    let batch = WriteBatch {
        controls: Some(controls.clone()),
        ..WriteBatch::default()
    };
    store.commit(&batch).unwrap();
    drop(store);
    let store = fixture.open();
    assert_eq!(store.queue_controls().unwrap(), controls);
    let snapshot = store.load().unwrap();
    assert_eq!(snapshot.controls, controls);
    assert_eq!(snapshot.tasks, vec![paused]);
}

/// Schedules, notifiers and outbox entries are kept by name; batches merged by the
/// group committer keep their order: a later write of a name removed earlier stays, a
/// later removal of a name written earlier wins.
pub(crate) fn records_by_name_are_written_and_removed_in_the_order_of_their_batches(
    fixture: &dyn Fixture,
) {
    use orch_protocol::{
        Actor, CatchUp, Notifier, NotifierSpec, NotifyFilter, NotifyTarget, OutboxEntry, Schedule,
        ScheduleSpec, ScheduledWork,
    };
    let actor = Actor {
        uid: 1,
        interface: "socket".into(),
    };
    let schedule = |name: &str| Schedule {
        spec: ScheduleSpec {
            name: name.into(),
            cron: "0 3 * * *".into(),
            timezone: None,
            catch_up: CatchUp::Skip,
            work: ScheduledWork::Task {
                task: Box::new(TaskSpec::command("true", vec![])),
            },
        },
        created_by: actor.clone(),
        created_at: Utc::now(),
        owner_host: None,
        paused: false,
        next_run: Some(Utc::now()),
        runs: 0,
        skipped: 0,
        last_run: None,
    };
    let notifier = Notifier {
        spec: NotifierSpec {
            name: "ci".into(),
            target: NotifyTarget::Command {
                command: vec!["true".into()],
            },
            filter: NotifyFilter::default(),
        },
        created_by: actor.clone(),
        created_at: Utc::now(),
        delivered: 0,
        given_up: 0,
        waiting: 0,
        last_error: None,
    };
    let entry = |key: &str| OutboxEntry {
        key: key.into(),
        notifier: "ci".into(),
        body: "{}".into(),
        event: "succeeded".into(),
        attempts: 0,
        due: Utc::now(),
    };
    let store = fixture.open();
    let mut first = WriteBatch::default();
    first.put_schedule(schedule("a"));
    first.put_schedule(schedule("b"));
    first.put_notifier(notifier.clone());
    first.outbox = vec![
        entry("00000000000000000002.ci"),
        entry("00000000000000000001.ci"),
    ];
    store.commit(&first).unwrap();
    // Removed, then written again, in two batches merged into one commit.
    let mut merged = WriteBatch::default();
    merged.remove_schedule("a".into());
    merged.outbox_removals = vec!["00000000000000000001.ci".into()];
    let mut later = WriteBatch::default();
    later.put_schedule(schedule("a"));
    later.remove_schedule("b".into());
    merged.append(later);
    store.commit(&merged).unwrap();
    drop(store);
    let store = fixture.open();
    let names: Vec<String> = store
        .schedules()
        .unwrap()
        .into_iter()
        .map(|s| s.spec.name)
        .collect();
    assert_eq!(names, vec!["a"]);
    assert_eq!(store.notifiers().unwrap(), vec![notifier.clone()]);
    let keys: Vec<String> = store
        .outbox(10)
        .unwrap()
        .into_iter()
        .map(|e| e.key)
        .collect();
    assert_eq!(keys, vec!["00000000000000000002.ci"]);
    let snapshot = store.load().unwrap();
    assert_eq!((snapshot.schedules.len(), snapshot.notifiers.len()), (1, 1));
    // Due ones by notifier, by when they are due; a later one is not due yet.
    let mut later = entry("00000000000000000003.ci");
    later.due = Utc::now() + chrono::Duration::hours(1);
    let mut retried = entry("00000000000000000002.ci");
    retried.due = Utc::now() - chrono::Duration::seconds(5);
    let mut batch = WriteBatch::default();
    batch.put_outbox(later.clone());
    batch.put_outbox(retried);
    store.commit(&batch).unwrap();
    let due: Vec<String> = store
        .outbox_due(Utc::now(), 10)
        .unwrap()
        .into_iter()
        .map(|e| e.key)
        .collect();
    assert_eq!(due, vec!["00000000000000000002.ci"]);
    let next = store.outbox_next_due().unwrap().unwrap();
    assert!(next < Utc::now(), "the retried one is due first");
    // A removed notifier's notifications all go.
    let purge = WriteBatch {
        outbox_purges: vec!["ci".into()],
        ..WriteBatch::default()
    };
    store.commit(&purge).unwrap();
    assert!(store.outbox(10).unwrap().is_empty());
    assert_eq!(store.outbox_next_due().unwrap(), None);
}
