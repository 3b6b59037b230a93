//! A live progress display: a header with the counts and the time so far, then a bar for
//! each running task with its progress and message, redrawn a few times a second on the
//! terminal's standard error and cleared at the end, so that what the command returns is
//! all that stays. It shows the tasks a command waits for (`orch wait`, `orch submit
//! --wait`, beside the wait), or, for `orch watch --live`, the whole queue or one
//! workflow's steps ([`Source`]).
//!
//! Shown only where someone looks: when standard error is a terminal (not `dumb`), and
//! not turned off with `$env.config.plugins.orchestrator.progress = false`. A display
//! polls the daemon on a connection of its own, from a thread of its own; it never delays
//! or changes the command's answer.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nu_plugin::EngineInterface;
use nu_protocol::Value;
use orch_protocol::{Client, Request, Response, Task, TaskFilter, TaskId, TaskStatus, WorkflowId};

/// How often the display is redrawn.
const TICK: Duration = Duration::from_millis(250);

/// Nothing is drawn for a wait shorter than this (no flicker for quick ones).
const FIRST_DRAW: Duration = Duration::from_millis(300);

/// The most tasks asked about per redraw, and the most bars drawn.
const POLLED: usize = 200;
const BARS: usize = 8;

/// The width of a bar, in cells.
const BAR_WIDTH: usize = 20;

/// A display running beside a wait; it is cleared when dropped.
pub struct Display {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Display {
    /// Starts a display of the tasks `ids` beside a wait, when the terminal and the
    /// settings ask for one.
    pub fn start(engine: &EngineInterface, ids: &[TaskId]) -> Option<Display> {
        Display::beside(engine, Source::Tasks(TaskPoll::new(ids)))
    }

    /// Starts a display of `source` beside a wait, when the terminal and the settings ask
    /// for one.
    pub fn beside(engine: &EngineInterface, source: Source) -> Option<Display> {
        if !wanted(engine) {
            return None;
        }
        let socket = crate::connection::socket_path(engine);
        let stop = Arc::new(AtomicBool::new(false));
        let watching = Watch {
            socket,
            source,
            stop: stop.clone(),
            started: Instant::now(),
        };
        let thread = std::thread::Builder::new()
            .name("orch-progress".into())
            .spawn(move || {
                let _ = watching.run(&|| false);
            })
            .ok()?;
        Some(Display {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Display {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Whether a display is wanted: standard error is a terminal that can draw, and the
/// plugin's `progress` setting is not `false`.
pub fn wanted(engine: &EngineInterface) -> bool {
    // SAFETY: isatty(3) only reads the descriptor's state.
    if unsafe { libc::isatty(libc::STDERR_FILENO) } != 1 {
        return false;
    }
    if let Ok(Some(Value::String { val, .. })) = engine.get_env_var("TERM")
        && val == "dumb"
    {
        return false;
    }
    let setting = match engine.get_plugin_config() {
        Ok(Some(Value::Record { val, .. })) => val.get("progress").cloned(),
        _ => None,
    };
    !matches!(setting, Some(Value::Bool { val: false, .. }))
}

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
struct Frame {
    header: String,
    running: Vec<Task>,
    over: bool,
}

/// A display run from start to end: what it watches, and when to stop.
struct Watch {
    socket: PathBuf,
    source: Source,
    stop: Arc<AtomicBool>,
    started: Instant,
}

impl Watch {
    /// Draws until the source is over, `stop` is set, or `interrupted()`; clears what it
    /// drew. The last header, or the error that ended it.
    fn run(mut self, interrupted: &dyn Fn() -> bool) -> Result<String, orch_protocol::ClientError> {
        let mut client = Client::connect(&self.socket, "nu_plugin_orchestrator-progress")?;
        let mut drawn = 0;
        let mut next = self.started + FIRST_DRAW;
        let mut last = String::new();
        let ended = loop {
            if self.stop.load(Ordering::SeqCst) || interrupted() {
                break Ok(last);
            }
            if Instant::now() >= next {
                let frame = match self.source.look(&mut client, self.started.elapsed()) {
                    Ok(frame) => frame,
                    Err(e) => break Err(e),
                };
                drawn = redraw(drawn, &lines(&frame));
                last = frame.header;
                if frame.over {
                    break Ok(last);
                }
                next = Instant::now() + TICK;
            }
            std::thread::sleep(Duration::from_millis(25));
        };
        redraw(drawn, &[]);
        ended
    }
}

/// `orch watch --live`: draws `source` on the terminal until it is over or Ctrl-C, then
/// clears it; the last header. Refused where nothing can be drawn.
pub fn live(engine: &EngineInterface, source: Source) -> Result<String, LiveError> {
    if !wanted(engine) {
        return Err(LiveError::NoTerminal);
    }
    let watching = Watch {
        socket: crate::connection::socket_path(engine),
        source,
        stop: Arc::new(AtomicBool::new(false)),
        // The first look at once: the command is the display.
        started: Instant::now() - FIRST_DRAW,
    };
    let signals = engine.signals().clone();
    watching
        .run(&|| signals.interrupted())
        .map_err(LiveError::Daemon)
}

/// Why `orch watch --live` cannot draw.
#[derive(Debug)]
pub enum LiveError {
    /// Standard error is not a terminal (or the setting turns the display off).
    NoTerminal,
    /// The daemon refused or went away.
    Daemon(orch_protocol::ClientError),
}

impl Source {
    /// Looks at the daemon once.
    fn look(
        &mut self,
        client: &mut Client,
        elapsed: Duration,
    ) -> Result<Frame, orch_protocol::ClientError> {
        match self {
            Source::Tasks(poll) => Ok(poll.look(client, elapsed)),
            Source::Queue => queue_frame(client, elapsed),
            Source::Workflow(id) => workflow_frame(client, *id, elapsed),
            Source::NewEnv { name, since } => env_frame(client, name, *since, elapsed),
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
    /// the frame of all that is known. A task it cannot read stays as it was.
    fn look(&mut self, client: &mut Client, elapsed: Duration) -> Frame {
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
            if let Ok(Response::Task { task }) = client.call(&Request::Get { id: self.ids[i] }) {
                self.known[i] = Some(*task);
            }
        }
        self.frame(elapsed)
    }

    /// The frame of what is known of the tasks.
    fn frame(&self, elapsed: Duration) -> Frame {
        let n = self.ids.len();
        let seen: Vec<&Task> = self.known.iter().flatten().collect();
        let count = |status: TaskStatus| seen.iter().filter(|t| t.state.status() == status).count();
        let running = count(TaskStatus::Running);
        let succeeded = count(TaskStatus::Succeeded);
        let finished = seen.iter().filter(|t| t.state.status().is_final()).count();
        let failed = finished - succeeded;
        let waiting = n - running - finished;
        Frame {
            header: format!(
                "orch: {n} task{} · {running} running · {waiting} waiting · {succeeded} done · {failed} failed · {:.1}s",
                if n == 1 { "" } else { "s" },
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

/// The queue's counts (from the daemon's health) and its running tasks.
fn queue_frame(
    client: &mut Client,
    elapsed: Duration,
) -> Result<Frame, orch_protocol::ClientError> {
    let Response::Health(health) = client.call(&Request::Health)? else {
        return Err(unexpected("health"));
    };
    let count = |status: TaskStatus| health.counts.get(&status).copied().unwrap_or(0);
    let waiting =
        count(TaskStatus::Queued) + count(TaskStatus::Blocked) + count(TaskStatus::Delayed);
    let failed = count(TaskStatus::Failed) + count(TaskStatus::DependencyFailed);
    let header = format!(
        "orch: {} running · {waiting} waiting · {} retrying · {} done · {failed} failed · {:.1}s",
        count(TaskStatus::Running),
        count(TaskStatus::RetryWaiting),
        count(TaskStatus::Succeeded),
        elapsed.as_secs_f64()
    );
    let filter = TaskFilter {
        status: vec![TaskStatus::Running],
        limit: Some(BARS + 1),
        ..TaskFilter::default()
    };
    let mut running = match client.call(&Request::List { filter })? {
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
    client: &mut Client,
    id: WorkflowId,
    elapsed: Duration,
) -> Result<Frame, orch_protocol::ClientError> {
    let request = Request::Workflow {
        id,
        offset: 0,
        limit: None,
    };
    let Response::Workflow(view) = client.call(&request)? else {
        return Err(unexpected("workflow"));
    };
    let summary = &view.workflow;
    let c = &summary.step_counts;
    let status = summary.state.status();
    let header = format!(
        "orch: workflow {id} {} {} · {} steps · {} running · {} waiting · {} done · {} failed · {:.1}s",
        summary.name,
        status.as_str(),
        summary.steps,
        c.running,
        c.blocked + c.queued + c.retry_waiting,
        c.succeeded,
        c.failed + c.cancelled + c.dependency_failed,
        elapsed.as_secs_f64()
    );
    let mut running = Vec::new();
    for step in view
        .tasks
        .iter()
        .filter(|s| s.status == Some(TaskStatus::Running))
        .take(BARS + 1)
    {
        if let Response::Task { task } = client.call(&Request::Get { id: step.task })? {
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
    client: &mut Client,
    name: &str,
    since: chrono::DateTime<chrono::Utc>,
    elapsed: Duration,
) -> Result<Frame, orch_protocol::ClientError> {
    let Response::Envs { envs } = client.call(&Request::Envs)? else {
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
            "orch: test environment {name} · creating · {:.1}s",
            elapsed.as_secs_f64()
        ),
        Some(env) => {
            let stage = match &env.state {
                orch_protocol::EnvState::Starting { stage, .. } => stage.as_str(),
                state => state.status(),
            };
            format!(
                "orch: test environment {} {name} ({}) · {stage} · {} node{} · {:.1}s",
                env.id,
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
fn unexpected(wanted: &str) -> orch_protocol::ClientError {
    orch_protocol::ClientError::Unexpected(format!("the daemon did not answer with {wanted}"))
}

/// The display's lines: the header, then a bar per running task (the first [`BARS`]).
fn lines(frame: &Frame) -> Vec<String> {
    let mut lines = vec![frame.header.clone()];
    for task in frame.running.iter().take(BARS) {
        lines.push(bar(task));
    }
    if frame.running.len() > BARS {
        lines.push("  … and more running".to_string());
    }
    lines
}

/// One running task's line: its id, a bar of its progress (empty until it reports one),
/// the percentage, its message, and what it runs.
fn bar(task: &Task) -> String {
    let percent = task
        .progress
        .as_ref()
        .and_then(|p| p.percent)
        .map(|p| p.clamp(0.0, 100.0));
    let filled = percent.map_or(0, |p| (p * BAR_WIDTH as f64 / 100.0) as usize);
    let shown = match percent {
        Some(p) => format!("{p:>3.0}%"),
        None => "   ·".to_string(),
    };
    let message = task
        .progress
        .as_ref()
        .and_then(|p| p.message.clone())
        .unwrap_or_default();
    let text = format!(
        "  #{:<5} {}{} {shown} {message}  {}",
        task.id,
        "█".repeat(filled),
        "░".repeat(BAR_WIDTH - filled),
        task.spec.describe()
    );
    clipped(&text, 120)
}

/// `text` cut to `width` characters.
fn clipped(text: &str, width: usize) -> String {
    match text.char_indices().nth(width) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// Replaces the `drawn` lines of the last drawing with `lines` (none: clears them);
/// how many lines are drawn now.
fn redraw(drawn: usize, lines: &[String]) -> usize {
    let mut out = String::new();
    if drawn > 0 {
        // To the start of the first drawn line, then clear to the end of the screen.
        out.push_str(&format!("\r\x1b[{drawn}A\x1b[J"));
    }
    for line in lines {
        out.push_str(line);
        out.push('\n');
    }
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(out.as_bytes());
    let _ = stderr.flush();
    lines.len()
}

#[cfg(test)]
mod tests {
    use super::*;
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
