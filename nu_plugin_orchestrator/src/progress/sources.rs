//! What a display looks at: the tasks a command waits for, the whole queue, one
//! workflow, or a test environment being created; each look gives a [`Frame`] (a header,
//! the running tasks, whether it is over). Tasks are counted by one rule in every view.

use std::path::PathBuf;
use std::time::Duration;

use orch_protocol::{
    Client, ClientError, EnvFilter, Request, Response, Task, TaskFilter, TaskId, TaskStatus,
    WorkflowId,
};

use super::BARS;
use super::draw::one_line;

/// The most tasks asked about per look.
const POLLED: usize = 50;

/// How many of the newest test environments a display of one being created reads.
const NEWEST_ENVS: usize = 20;

/// What a display shows.
pub enum Source {
    /// The tasks a command waits for, until every one is final.
    Tasks(TaskPoll),
    /// The whole queue: its counts and running tasks, until Ctrl-C.
    Queue,
    /// One workflow: its step counts and running steps, until it is final.
    Workflow(WorkflowId),
    /// A test environment being created (`orch test env create`): the newest one of
    /// this name created since the display started, and its stage.
    NewEnv {
        /// Its name.
        name: String,
        /// When the display started.
        since: chrono::DateTime<chrono::Utc>,
    },
}

/// One look at a source: the header and the running tasks, and whether it is over.
pub(super) struct Frame {
    pub(super) header: String,
    pub(super) running: Vec<Task>,
    pub(super) over: bool,
}

/// The display's connection to the daemon: made (again) when needed, each call given
/// up when the display is to stop.
pub(super) struct Asker<'a> {
    pub(super) socket: PathBuf,
    pub(super) client: Option<Client>,
    pub(super) stop: &'a dyn Fn() -> bool,
}

impl Asker<'_> {
    /// Sends `request` and waits for its answer (a lost connection is made again at the
    /// next call).
    fn ask(&mut self, request: &Request) -> Result<Response, ClientError> {
        if self.client.is_none() {
            self.client = Some(Client::connect(
                &self.socket,
                "nu_plugin_orchestrator-progress",
            )?);
        }
        let client = self.client.as_mut().expect("connected above");
        let answer = client.call_interruptible(request, self.stop);
        if answer
            .as_ref()
            .is_err_and(|e| !matches!(e, ClientError::Daemon(_)))
        {
            self.client = None;
        }
        answer
    }
}

impl Frame {
    /// The frame while the daemon does not answer.
    pub(super) fn unanswered(error: &ClientError, elapsed: Duration) -> Frame {
        Frame {
            header: format!(
                "orch: waiting for the daemon ({}) · {:.1}s",
                one_line(&error.to_string()),
                elapsed.as_secs_f64()
            ),
            running: Vec::new(),
            over: false,
        }
    }
}

impl Source {
    /// Looks at the daemon once.
    pub(super) fn look(
        &mut self,
        asker: &mut Asker,
        elapsed: Duration,
    ) -> Result<Frame, ClientError> {
        match self {
            Source::Tasks(poll) => poll.look(asker, elapsed),
            Source::Queue => queue_frame(asker, elapsed),
            Source::Workflow(id) => workflow_frame(asker, *id, elapsed),
            Source::NewEnv { name, since } => env_frame(asker, name, *since, elapsed),
        }
    }
}

/// The tasks a command waits for, as last seen.
pub struct TaskPoll {
    ids: Vec<TaskId>,
    known: Vec<Option<Task>>,
    cursor: usize,
}

impl TaskPoll {
    /// A poll of `ids`, none seen yet.
    pub fn new(ids: &[TaskId]) -> TaskPoll {
        TaskPoll {
            ids: ids.to_vec(),
            known: vec![None; ids.len()],
            cursor: 0,
        }
    }

    /// Asks about up to [`POLLED`] unfinished tasks (from where the last look stopped);
    /// the frame of all that is known. A task the daemon cannot show stays as it was; a
    /// daemon that does not answer is an error.
    pub(super) fn look(
        &mut self,
        asker: &mut Asker,
        elapsed: Duration,
    ) -> Result<Frame, ClientError> {
        let n = self.ids.len();
        let mut asked = 0;
        for _ in 0..n {
            if asked == POLLED {
                break;
            }
            let i = self.cursor % n;
            self.cursor = (self.cursor + 1) % n;
            if self.known[i]
                .as_ref()
                .is_some_and(|t| t.state.status().is_final())
            {
                continue;
            }
            asked += 1;
            match asker.ask(&Request::Get { id: self.ids[i] }) {
                Ok(Response::Task { task }) => self.known[i] = Some(*task),
                Ok(_) | Err(ClientError::Daemon(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.frame(elapsed))
    }

    /// The frame of what is known of the tasks.
    fn frame(&self, elapsed: Duration) -> Frame {
        let n = self.ids.len();
        let seen: Vec<&Task> = self.known.iter().flatten().collect();
        let counts = Counts::of(seen.iter().map(|t| t.state.status()));
        let finished = seen.iter().filter(|t| t.state.status().is_final()).count();
        Frame {
            header: format!(
                "orch: {n} task{} · {} · {:.1}s",
                if n == 1 { "" } else { "s" },
                counts.words(n as u64),
                elapsed.as_secs_f64()
            ),
            running: seen
                .into_iter()
                .filter(|t| t.state.status() == TaskStatus::Running)
                .cloned()
                .collect(),
            over: finished == n,
        }
    }
}

/// Tasks by how they stand, counted the same way in every view.
#[derive(Debug, Default, PartialEq)]
struct Counts {
    running: u64,
    done: u64,
    failed: u64,
    cancelled: u64,
    /// Known and neither running nor final (blocked, queued, delayed, stashed, waiting to
    /// retry).
    waiting: u64,
}

impl Counts {
    /// The counts of these statuses.
    fn of(statuses: impl Iterator<Item = TaskStatus>) -> Counts {
        let mut counts = Counts::default();
        for status in statuses {
            counts.add(status, 1);
        }
        counts
    }

    fn add(&mut self, status: TaskStatus, n: u64) {
        match status {
            TaskStatus::Running => self.running += n,
            TaskStatus::Succeeded => self.done += n,
            TaskStatus::Failed | TaskStatus::DependencyFailed => self.failed += n,
            TaskStatus::Cancelled => self.cancelled += n,
            _ => self.waiting += n,
        }
    }

    /// `running · waiting · done · failed` (and cancelled, when some were), of `total`
    /// (those not seen yet count as waiting).
    fn words(&self, total: u64) -> String {
        let seen = self.running + self.done + self.failed + self.cancelled + self.waiting;
        let waiting = self.waiting + total.saturating_sub(seen);
        let mut words = format!(
            "{} running · {waiting} waiting · {} done · {} failed",
            self.running, self.done, self.failed
        );
        if self.cancelled > 0 {
            words.push_str(&format!(" · {} cancelled", self.cancelled));
        }
        words
    }
}

/// The queue's counts (from the daemon's health) and its running tasks.
fn queue_frame(asker: &mut Asker, elapsed: Duration) -> Result<Frame, ClientError> {
    let Response::Health(health) = asker.ask(&Request::Health)? else {
        return Err(unexpected("health"));
    };
    let mut counts = Counts::default();
    for (status, n) in &health.counts {
        counts.add(*status, *n);
    }
    let total = health.counts.values().sum();
    let header = format!(
        "orch: queue · {} · {:.1}s",
        counts.words(total),
        elapsed.as_secs_f64()
    );
    let filter = TaskFilter {
        status: vec![TaskStatus::Running],
        limit: Some(BARS + 1),
        ..TaskFilter::default()
    };
    let mut running = match asker.ask(&Request::List { filter })? {
        Response::Tasks { tasks, .. } => tasks,
        _ => return Err(unexpected("tasks")),
    };
    running.reverse(); // oldest first
    Ok(Frame {
        header,
        running,
        over: false,
    })
}

/// One workflow's state and step counts, and its running steps.
fn workflow_frame(
    asker: &mut Asker,
    id: WorkflowId,
    elapsed: Duration,
) -> Result<Frame, ClientError> {
    // The first steps only: the bars of a very large workflow are those of its first
    // page, and the counts are always whole.
    let request = Request::Workflow {
        id,
        offset: 0,
        limit: Some(POLLED),
    };
    let Response::Workflow(view) = asker.ask(&request)? else {
        return Err(unexpected("workflow"));
    };
    let summary = &view.workflow;
    let c = &summary.step_counts;
    let counts = Counts {
        running: c.running,
        done: c.succeeded,
        failed: c.failed + c.dependency_failed,
        cancelled: c.cancelled,
        waiting: c.blocked + c.queued + c.retry_waiting,
    };
    let status = summary.state.status();
    let header = format!(
        "orch: workflow {id} {} {} · {} steps · {} · {:.1}s",
        one_line(&summary.name),
        status.as_str(),
        summary.steps,
        counts.words(summary.steps),
        elapsed.as_secs_f64()
    );
    let mut running = Vec::new();
    for step in view
        .tasks
        .iter()
        .filter(|s| s.status == Some(TaskStatus::Running))
        .take(BARS + 1)
    {
        if let Response::Task { task } = asker.ask(&Request::Get { id: step.task })? {
            running.push(*task);
        }
    }
    Ok(Frame {
        header,
        running,
        over: status.is_final(),
    })
}

/// The newest test environment named `name` created since `since` (none yet: the
/// daemon has not recorded it), and where its setting up is.
fn env_frame(
    asker: &mut Asker,
    name: &str,
    since: chrono::DateTime<chrono::Utc>,
    elapsed: Duration,
) -> Result<Frame, ClientError> {
    // The environment was just recorded: it is among the newest.
    let newest = EnvFilter {
        limit: Some(NEWEST_ENVS),
        ..EnvFilter::default()
    };
    let Response::Envs { envs } = asker.ask(&Request::Envs { filter: newest })? else {
        return Err(unexpected("test environments"));
    };
    // Created at least a second before the display started: the clocks are the same
    // host's, but the record's time is taken before the answer.
    let recent = since - chrono::Duration::seconds(1);
    let env = envs
        .iter()
        .find(|e| e.name == name && e.created_at >= recent);
    let header = match env {
        None => format!(
            "orch: test environment {} · creating · {:.1}s",
            one_line(name),
            elapsed.as_secs_f64()
        ),
        Some(env) => {
            let stage = match &env.state {
                orch_protocol::EnvState::Starting { stage, .. } => stage.as_str(),
                state => state.status(),
            };
            format!(
                "orch: test environment {} {} ({}) · {stage} · {} node{} · {:.1}s",
                env.id,
                one_line(name),
                env.kind,
                env.nodes.len(),
                if env.nodes.len() == 1 { "" } else { "s" },
                elapsed.as_secs_f64()
            )
        }
    };
    Ok(Frame {
        header,
        running: Vec::new(),
        over: false,
    })
}

/// The error of an answer of the wrong kind.
fn unexpected(wanted: &str) -> ClientError {
    ClientError::Unexpected(format!("the daemon did not answer with {wanted}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::draw::lines;
    use orch_protocol::{Progress, TaskSpec, TaskState};

    fn running(id: TaskId, percent: Option<f64>, message: &str) -> Task {
        Task {
            id,
            spec: TaskSpec::command("sh", vec!["install.sh".into()]),
            state: TaskState::Running {
                attempt: 1,
                started_at: chrono::Utc::now(),
                paused_at: None,
            },
            submitted_at: chrono::Utc::now(),
            attempts: Vec::new(),
            attempts_before_retry: 0,
            progress: Some(Progress {
                percent,
                message: Some(message.into()),
            }),
        }
    }

    #[test]
    fn the_header_counts_and_each_running_task_has_a_bar() {
        let mut poll = TaskPoll::new(&[7, 8, 9]);
        poll.known = vec![
            Some(running(7, Some(50.0), "installing")),
            None,
            Some(running(9, None, "starting")),
        ];
        let frame = poll.frame(Duration::from_millis(4200));
        assert!(!frame.over);
        let lines = lines(&frame);
        assert_eq!(
            lines[0],
            "orch: 3 tasks · 2 running · 1 waiting · 0 done · 0 failed · 4.2s"
        );
        assert!(
            lines[1].starts_with("  #7     ██████████░░░░░░░░░░  50% installing  sh install.sh"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].contains("░░░░░░░░░░░░░░░░░░░░    · starting"),
            "{}",
            lines[2]
        );
    }
}
