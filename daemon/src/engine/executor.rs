//! What carries out a step's effects once its batch is durable (commit-before-act):
//! events published, attempts launched, stopped, paused or resumed, retry and schedule
//! timers armed, scheduled workflows expanded off the engine's task, logs deleted, the
//! engine told which step settled, clients answered. A failed commit stops the daemon and
//! acts on nothing.

use std::sync::Arc;

use chrono::Utc;
use orch_protocol::{Event, Nudge, TaskId};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::effects::{Answer, Expansion, ScheduleTimer, Timer};
use super::{Command, Input};
use crate::events::EventBus;
use crate::runner::{Launch, Runner, Steering};
use crate::store::StoreError;
use crate::workflows::Draft;

/// How many scheduled workflows are expanded at once, at most.
pub(super) const MAX_EXPANSIONS: usize = 4;

/// How long a scheduled workflow's expansion may take.
const EXPANSION_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Expands a scheduled workflow from the workspace as it is at its run.
pub trait Expand: Send + Sync + 'static {
    /// The checked workflow of `request` (confined unless this is `owner_host`), or why
    /// it cannot be.
    fn expand(
        &self,
        request: &orch_protocol::WorkflowRequest,
        owner_host: Option<&str>,
    ) -> Result<Draft, String>;
}

/// What carries out a step's effects, on the committer's thread, once it is durable.
#[derive(Clone)]
pub(super) struct Executor {
    pub(super) expander: Arc<dyn Expand>,
    /// Permits for expansions under way (each holds a blocking thread until it ends,
    /// even past its time limit).
    pub(super) expanding: Arc<tokio::sync::Semaphore>,
    pub(super) outbox: Arc<tokio::sync::Notify>,
    pub(super) bus: EventBus,
    pub(super) runner: Runner,
    pub(super) mailbox: mpsc::UnboundedSender<Input>,
    pub(super) fatal: CancellationToken,
    pub(super) runtime: tokio::runtime::Handle,
}

/// A step's effects, with the runner's launches and tokens made ready.
pub(super) struct Work {
    pub(super) events: Vec<Event>,
    pub(super) launches: Vec<Launch>,
    pub(super) stops: Vec<CancellationToken>,
    /// Attempts run here to pause (true) or resume.
    pub(super) pauses: Vec<(Arc<Steering>, bool)>,
    /// Attempts run here to signal or give input.
    pub(super) nudges: Vec<(Arc<Steering>, Nudge)>,
    pub(super) timers: Vec<Timer>,
    pub(super) schedule_timers: Vec<ScheduleTimer>,
    pub(super) expansions: Vec<Expansion>,
    pub(super) outbox_changed: bool,
    pub(super) answers: Vec<Answer>,
    pub(super) removed_logs: Vec<TaskId>,
    pub(super) progress_written: bool,
    pub(super) stopped: Vec<tokio::sync::oneshot::Sender<()>>,
    pub(super) settled: Option<u64>,
    pub(super) ended: Vec<(TaskId, u32)>,
}

impl Executor {
    /// Carries out a step's effects after its commit: all of them when it is durable;
    /// when it failed, the daemon stops, acting on nothing, and only the answers go
    /// (with the error).
    pub(super) fn carry_out(&self, work: Work, committed: Result<(), &StoreError>) {
        match committed {
            Err(e) => {
                tracing::error!(error = %e, "cannot commit state; stopping the daemon");
                self.fatal.cancel();
            }
            Ok(()) => {
                self.bus.publish(work.events);
                for launch in work.launches {
                    self.runner.launch(&self.runtime, launch);
                }
                for token in work.stops {
                    token.cancel();
                }
                for (steering, paused) in work.pauses {
                    steering.set_paused(paused);
                }
                for (steering, nudge) in work.nudges {
                    steering.nudge(nudge);
                }
                for timer in work.timers {
                    self.arm(timer);
                }
                for timer in work.schedule_timers {
                    self.arm_schedule(timer);
                }
                for expansion in work.expansions {
                    self.expand(expansion);
                }
                if work.outbox_changed {
                    self.outbox.notify_one();
                }
                for id in work.removed_logs {
                    self.runner.remove_log(id);
                }
                if let Some(step) = work.settled {
                    let _ = self.mailbox.send(Input::Committed { step });
                }
                for (id, attempt) in work.ended {
                    self.runner.release(id, attempt);
                }
            }
        }
        if work.progress_written {
            let _ = self.mailbox.send(Input::ProgressCommitted);
        }
        for answer in work.answers {
            answer.send(committed);
        }
        for done in work.stopped {
            let _ = done.send(());
        }
    }

    /// Sends the timer's input when it is due.
    fn arm(
        &self,
        Timer {
            id,
            next_attempt,
            due,
        }: Timer,
    ) {
        let delay = (due - Utc::now()).to_std().unwrap_or_default();
        let mailbox = self.mailbox.clone();
        self.runtime.spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = mailbox.send(Input::RetryDue { id, next_attempt });
        });
    }
}

impl Executor {
    /// Arms a schedule's timer: at its time, the engine is told.
    fn arm_schedule(&self, ScheduleTimer { schedule, due }: ScheduleTimer) {
        let delay = (due - Utc::now()).to_std().unwrap_or_default();
        let mailbox = self.mailbox.clone();
        self.runtime.spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = mailbox.send(Input::ScheduleDue {
                name: schedule,
                slot: due,
            });
        });
    }

    /// Expands a scheduled workflow (it reads files: off the engine's task), then hands
    /// it to the engine.
    fn expand(&self, expansion: Expansion) {
        let (mailbox, expander) = (self.mailbox.clone(), self.expander.clone());
        let permit = self.expanding.clone().try_acquire_owned();
        self.runtime.spawn(async move {
            let Expansion {
                schedule,
                slot,
                request,
                owner_host,
            } = expansion;
            let draft = match permit {
                // Every permit is held by an expansion that does not end (a workspace
                // that does not answer): no more threads go to it.
                Err(_) => Err(format!(
                    "{MAX_EXPANSIONS} expansions are still under way (does the workspace answer?)"
                )),
                Ok(permit) => {
                    let expanded = tokio::task::spawn_blocking(move || {
                        let _permit = permit;
                        expander.expand(&request, owner_host.as_deref())
                    });
                    match tokio::time::timeout(EXPANSION_LIMIT, expanded).await {
                        Ok(Ok(draft)) => draft.map(Box::new),
                        Ok(Err(e)) => Err(format!("the expansion failed: {e}")),
                        Err(_) => Err("the expansion took too long".into()),
                    }
                }
            };
            let fire = Command::FireSchedule {
                name: schedule,
                slot,
                draft,
            };
            let _ = mailbox.send(Input::Request(fire));
        });
    }
}
