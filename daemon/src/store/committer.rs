//! Group commit: one writer thread turns every batch waiting at a moment into a single
//! durable transaction, then runs each batch's completion in submission order.
//!
//! Order is the guarantee callers build on: a completion runs only after its own batch
//! and every batch submitted before it are durable.
//!
//! When no batch has come for [`SETTLE_AFTER`], the writer lets the store fold what it
//! holds durable in a side form into its main file ([`Store::settle`]: the redb store's
//! checkpoint), so that this costs the commits of a burst nothing.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Store, StoreError, WriteBatch};

/// Runs after a batch's commit, with its result.
pub type Completion = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

/// Told how long each transaction took (the daemon feeds its commit latency metric).
pub type CommitObserver = Box<dyn Fn(Duration) + Send>;

/// The most batches merged into one transaction.
const MAX_GROUP: usize = 4096;

/// How long the writer waits for a batch before it settles the store.
const SETTLE_AFTER: Duration = Duration::from_millis(50);

struct Job {
    batch: WriteBatch,
    done: Completion,
}

/// Commit statistics, for health and benchmarks.
#[derive(Debug, Default, Clone, Copy)]
pub struct CommitStats {
    /// Transactions committed.
    pub transactions: u64,
    /// Batches committed (several per transaction under load).
    pub batches: u64,
    /// Total time spent committing, in microseconds.
    pub commit_micros: u64,
}

/// The handle that submits batches to the writer thread. Dropping every handle lets the
/// thread finish the batches already submitted and exit.
#[derive(Clone)]
pub struct GroupCommitter {
    jobs: Sender<Job>,
}

impl GroupCommitter {
    /// Starts the writer thread over `store`; `observe` is told each transaction's
    /// duration.
    pub fn start(
        store: Arc<dyn Store>,
        observe: CommitObserver,
    ) -> (GroupCommitter, JoinHandle<CommitStats>) {
        let (jobs, rx) = channel();
        let thread = std::thread::Builder::new()
            .name("group-commit".into())
            .spawn(move || writer_loop(store.as_ref(), rx, &observe))
            .expect("the writer thread can be spawned");
        (GroupCommitter { jobs }, thread)
    }

    /// Queues `batch`; `done` runs once it is durable (or failed).
    pub fn submit(
        &self,
        batch: WriteBatch,
        done: impl FnOnce(Result<(), StoreError>) + Send + 'static,
    ) {
        let job = Job {
            batch,
            done: Box::new(done),
        };
        if let Err(lost) = self.jobs.send(job) {
            let job = lost.0;
            (job.done)(Err(StoreError::Backend(
                "the store writer has stopped".into(),
            )));
        }
    }

    /// Commits `batch` and waits for it.
    pub async fn commit(&self, batch: WriteBatch) -> Result<(), StoreError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(batch, move |result| {
            let _ = tx.send(result);
        });
        rx.await
            .unwrap_or_else(|_| Err(StoreError::Backend("the store writer has stopped".into())))
    }
}

fn writer_loop(store: &dyn Store, rx: Receiver<Job>, observe: &CommitObserver) -> CommitStats {
    let mut stats = CommitStats::default();
    // After a failed commit nothing more is written: later batches were computed from
    // state that never became durable.
    let mut failed: Option<StoreError> = None;
    while let Some(first) = next_job(store, &rx, &mut failed) {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        let mut merged = WriteBatch::default();
        let mut completions = Vec::with_capacity(group.len());
        for job in group {
            merged.append(job.batch);
            completions.push(job.done);
        }
        let started = Instant::now();
        let result = match &failed {
            Some(e) => Err(StoreError::Backend(format!(
                "not written: an earlier commit failed ({e})"
            ))),
            None if merged.is_empty() => Ok(()),
            None => store.commit(&merged),
        };
        stats.transactions += 1;
        stats.batches += completions.len() as u64;
        let took = started.elapsed();
        stats.commit_micros += took.as_micros() as u64;
        observe(took);
        if let (Err(e), None) = (&result, &failed) {
            tracing::error!(error = %e, "commit failed");
            failed = Some(e.clone());
        }
        for done in completions {
            done(result.clone());
        }
    }
    if failed.is_none()
        && let Err(e) = store.settle()
    {
        tracing::error!(error = %e, "the store's last checkpoint failed");
    }
    stats
}

/// The next batch to commit (`None` once every handle is dropped); while the store is
/// unsettled and none comes for [`SETTLE_AFTER`], it settles it. A failed settle counts
/// as a failed commit: nothing more is written.
fn next_job(store: &dyn Store, rx: &Receiver<Job>, failed: &mut Option<StoreError>) -> Option<Job> {
    loop {
        if failed.is_some() || !store.unsettled() {
            return rx.recv().ok();
        }
        match rx.recv_timeout(SETTLE_AFTER) {
            Ok(job) => return Some(job),
            Err(RecvTimeoutError::Disconnected) => return None,
            Err(RecvTimeoutError::Timeout) => {
                if let Err(e) = store.settle() {
                    tracing::error!(error = %e, "a checkpoint of the store failed");
                    *failed = Some(e);
                }
            }
        }
    }
}
