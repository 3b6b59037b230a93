//! What one turn of the engine produces: the changes to commit, and what to do once they
//! are durable. The state machine only describes these; the driver carries them out.

use chrono::{DateTime, Utc};
use orch_protocol::{
    ErrorKind, ErrorReply, Nudge, Task, TaskId, TaskSpec, TestEnv, WorkflowSummary,
};
use tokio::sync::oneshot;

use super::Reply;
use crate::store::{StoreError, WriteBatch};

/// One turn's work: the batch to commit, then its effects.
#[derive(Default)]
pub struct Step {
    /// Task, workflow and environment records, events and audit records to write in one
    /// transaction. Its events are published once it is durable.
    pub batch: WriteBatch,
    /// What to do once the batch is durable.
    pub effects: Effects,
}

impl Step {
    /// True when there is nothing to commit and nothing to do.
    pub fn is_empty(&self) -> bool {
        self.batch.is_empty() && self.effects.is_empty()
    }
}

/// What to do once a step's batch is durable (answers and shutdown waiters are answered
/// even when the commit failed, with its error).
#[derive(Default)]
pub struct Effects {
    /// Attempts to start (each one's `Running` record is in the batch).
    pub launches: Vec<Start>,
    /// Tasks whose running attempt is to be stopped (a cancel or a shutdown).
    pub stops: Vec<TaskId>,
    /// Running attempts to pause (true: SIGSTOP) or resume (false: SIGCONT), as
    /// `(task, attempt, paused)`, in order (one of an attempt no longer running is
    /// dropped).
    pub pauses: Vec<(TaskId, u32, bool)>,
    /// Signals and input for running attempts, as `(task, attempt, nudge)`, in order
    /// (one for an attempt no longer running is dropped).
    pub nudges: Vec<(TaskId, u32, Nudge)>,
    /// Retry timers to arm.
    pub timers: Vec<Timer>,
    /// Schedule timers to arm.
    pub schedule_timers: Vec<ScheduleTimer>,
    /// Scheduled workflows to expand (answered with [`super::Command::FireSchedule`]).
    pub expansions: Vec<Expansion>,
    /// The batch puts notifications in the outbox: the deliverer is woken once it is
    /// durable.
    pub outbox_changed: bool,
    /// Answers to requests.
    pub answers: Vec<Answer>,
    /// Tasks removed by this batch whose logs are to be deleted.
    pub removed_logs: Vec<TaskId>,
    /// The batch carries coalesced progress values: once it is durable the state machine
    /// is told ([`Input::ProgressCommitted`](super::Input::ProgressCommitted)), so that
    /// the next values may go.
    pub progress_written: bool,
    /// Shutdown requests to answer: nothing runs any more.
    pub stopped: Vec<oneshot::Sender<()>>,
    /// The step's number when it changed tasks: once it is durable the state machine is
    /// told ([`Input::Committed`](super::Input::Committed)), so that it may let go of
    /// them.
    pub settled: Option<u64>,
}

impl Effects {
    fn is_empty(&self) -> bool {
        self.launches.is_empty()
            && self.stops.is_empty()
            && self.pauses.is_empty()
            && self.nudges.is_empty()
            && self.timers.is_empty()
            && self.schedule_timers.is_empty()
            && self.expansions.is_empty()
            && !self.outbox_changed
            && self.answers.is_empty()
            && self.removed_logs.is_empty()
            && !self.progress_written
            && self.stopped.is_empty()
            && self.settled.is_none()
    }
}

/// An attempt to start.
#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    /// The task.
    pub id: TaskId,
    /// Which attempt (1-based).
    pub attempt: u32,
    /// What to run.
    pub spec: TaskSpec,
    /// The node of the cluster that runs it (`None`: this daemon runs it).
    pub node: Option<super::state::NodeName>,
}

/// A retry timer: at `due`, task `id` is queued for `next_attempt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timer {
    /// The task.
    pub id: TaskId,
    /// The attempt it waits for.
    pub next_attempt: u32,
    /// When it fires.
    pub due: DateTime<Utc>,
}

/// A schedule's timer: at `due`, its time comes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleTimer {
    /// The schedule.
    pub schedule: String,
    /// Its time.
    pub due: DateTime<Utc>,
}

/// A scheduled workflow to expand from the workspace as it is now.
#[derive(Debug, Clone, PartialEq)]
pub struct Expansion {
    /// The schedule.
    pub schedule: String,
    /// The time it runs for.
    pub slot: DateTime<Utc>,
    /// The workflow.
    pub request: orch_protocol::WorkflowRequest,
    /// The host where the schedule's creator may name any workspace (see
    /// [`orch_protocol::Schedule::owner_host`]).
    pub owner_host: Option<String>,
}

/// A value a request may be answered with.
pub trait Answerable: Sized {
    /// The answer `result` to `reply`.
    fn answer(reply: Reply<Self>, result: Result<Self, ErrorReply>) -> Answer;
}

/// Declares [`Answer`] with one variant per answer type, and their [`Answerable`] impls.
macro_rules! answers {
    ($($(#[$doc:meta])* $variant:ident($value:ty),)*) => {
        /// An answer to a request: where it goes and what it says.
        pub enum Answer {
            $($(#[$doc])* $variant(Reply<$value>, Result<$value, ErrorReply>),)*
        }

        impl Answer {
            /// Sends the answer once the batch that makes it true has been committed;
            /// when that commit failed, a success becomes the store's error (a refusal
            /// stands).
            pub fn send(self, committed: Result<(), &StoreError>) {
                match self {
                    $(Answer::$variant(reply, result) => {
                        let _ = reply.send(settled(result, committed));
                    })*
                }
            }
        }

        $(impl Answerable for $value {
            fn answer(reply: Reply<Self>, result: Result<Self, ErrorReply>) -> Answer {
                Answer::$variant(reply, result)
            }
        })*
    };
}

answers! {
    /// Created tasks.
    Tasks(Vec<Task>),
    /// A task after a change.
    Task(Task),
    /// A workflow after a change.
    Workflow(WorkflowSummary),
    /// A saved test environment.
    Env(TestEnv),
    /// The removed tasks and workflows.
    Removed(super::Selection),
    /// An audit record written.
    Recorded(()),
    /// The queue's controls after a change.
    Queue(orch_protocol::QueueView),
    /// A schedule after a change.
    Schedule(orch_protocol::Schedule),
    /// A notifier after a change.
    Notifier(orch_protocol::Notifier),
}

/// `result`, unless the commit it depends on failed.
fn settled<T>(
    result: Result<T, ErrorReply>,
    committed: Result<(), &StoreError>,
) -> Result<T, ErrorReply> {
    let value = result?;
    committed.map_err(internal)?;
    Ok(value)
}

/// A store failure as an error answer.
fn internal(e: &StoreError) -> ErrorReply {
    ErrorReply::new(ErrorKind::Internal, e.to_string())
}
