//! Fills a store with finished tasks, for `bench/finished.sh`: running ten million tasks
//! through a daemon would take hours here, and what the benchmark measures (what the
//! daemon costs with them in its store) depends only on the records being there.
//!
//! The records go through the store's own commit, as the daemon's would, so the status
//! index, the counts, the label index and the highest id are what a daemon would have
//! written: each task succeeded after one attempt of `/bin/true`, one in ten has the label
//! `bench`. No events are written (the event log has its own retention).
//!
//!   cargo run --release -p provisioning-orchestrator --example fill_finished -- STORE N
//!
//! STORE is the redb file (`<data dir>/orchestrator.redb`); it must not be open in a
//! daemon. Tasks get the ids after the store's highest.

use std::path::PathBuf;
use std::process::ExitCode;

use chrono::Utc;
use orch_protocol::{Attempt, AttemptOutcome, Task, TaskId, TaskSpec, TaskState};
use provisioning_orchestrator::store::{RedbStore, Store, TaskWrite, WriteBatch};

/// Tasks per transaction: large enough that commits do not dominate.
const BATCH: u64 = 20_000;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(path), Some(count)) = (args.first(), args.get(1).and_then(|n| n.parse().ok())) else {
        eprintln!("usage: fill_finished STORE N   (N: how many finished tasks to add)");
        return ExitCode::from(2);
    };
    match fill(&PathBuf::from(path), count) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fill_finished: {e}");
            ExitCode::FAILURE
        }
    }
}

fn fill(path: &std::path::Path, count: u64) -> Result<(), Box<dyn std::error::Error>> {
    let store = RedbStore::open(path)?;
    let first = store.load()?.last_task_id + 1;
    let mut next = first;
    while next < first + count {
        let end = (next + BATCH).min(first + count);
        let batch = WriteBatch {
            tasks: (next..end).map(finished).collect(),
            ..WriteBatch::default()
        };
        store.commit(&batch)?;
        next = end;
        if (next - first) % 1_000_000 == 0 {
            eprintln!("fill_finished: {} tasks", next - first);
        }
    }
    Ok(())
}

/// A task that succeeded after one attempt of `/bin/true`, as a daemon records it.
fn finished(id: TaskId) -> TaskWrite {
    let now = Utc::now();
    let mut spec = TaskSpec::command("/bin/true", Vec::new());
    if id.is_multiple_of(10) {
        spec.label = Some("bench".into());
    }
    let task = Task {
        id,
        spec,
        state: TaskState::Succeeded { finished_at: now },
        submitted_at: now,
        attempts: vec![Attempt {
            number: 1,
            started_at: now,
            finished_at: Some(now),
            outcome: Some(AttemptOutcome::Exited { code: 0 }),
            node: None,
        }],
        attempts_before_retry: 0,
        progress: None,
    };
    TaskWrite {
        task,
        previous: None,
        reindex: None,
    }
}
