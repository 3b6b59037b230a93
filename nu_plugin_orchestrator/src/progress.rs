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
use orch_protocol::{
    Client, ClientError, Request, Response, Task, TaskFilter, TaskId, TaskStatus, WorkflowId,
};

/// How often the display is redrawn.
const TICK: Duration = Duration::from_millis(250);

/// Nothing is drawn for a wait shorter than this (no flicker for quick ones).
const FIRST_DRAW: Duration = Duration::from_millis(300);

/// The most tasks asked about per redraw, and the most bars drawn.
const POLLED: usize = 50;
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
            first_draw: FIRST_DRAW,
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

/// The display's connection to the daemon: made (again) when needed, each call given
/// up when the display is to stop.
struct Asker<'a> {
    socket: PathBuf,
    client: Option<Client>,
    stop: &'a dyn Fn() -> bool,
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

/// A display run from start to end: what it watches, and when to stop.
struct Watch {
    socket: PathBuf,
    source: Source,
    stop: Arc<AtomicBool>,
    started: Instant,
    /// How long after the start the first drawing comes.
    first_draw: Duration,
}

impl Watch {
    /// Draws until the source is over, `stop` is set, or `interrupted()`; clears what it
    /// drew. The last header, or the daemon's refusal that ended it (a daemon that does
    /// not answer is waited for, and said so).
    fn run(mut self, interrupted: &dyn Fn() -> bool) -> Result<String, ClientError> {
        let stopping = || self.stop.load(Ordering::SeqCst) || interrupted();
        let mut asker = Asker {
            socket: self.socket.clone(),
            client: None,
            stop: &stopping,
        };
        let mut drawn = 0;
        let mut next = self.started + self.first_draw;
        let mut last = String::new();
        let ended = loop {
            if stopping() {
                break Ok(last);
            }
            if Instant::now() >= next {
                let elapsed = self.started.elapsed();
                let frame = match self.source.look(&mut asker, elapsed) {
                    Ok(frame) => frame,
                    Err(ClientError::Daemon(reply)) => break Err(ClientError::Daemon(reply)),
                    Err(_) if stopping() => break Ok(last),
                    Err(e) => Frame::unanswered(&e, elapsed),
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

impl Frame {
    /// The frame while the daemon does not answer.
    fn unanswered(error: &ClientError, elapsed: Duration) -> Frame {
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

/// `orch watch --live`: draws `source` on the terminal until it is over or Ctrl-C, then
/// clears it; the last header. Refused where nothing can be drawn.
pub fn live(engine: &EngineInterface, source: Source) -> Result<String, LiveError> {
    if !wanted(engine) {
        return Err(LiveError::NoTerminal);
    }
    follow(engine, source).map_err(LiveError::Daemon)
}

/// Draws `source` until it is over or Ctrl-C, then clears it (the caller decided that a
/// display is wanted); the last header, or the daemon's refusal.
pub fn follow(engine: &EngineInterface, source: Source) -> Result<String, ClientError> {
    let watching = Watch {
        socket: crate::connection::socket_path(engine),
        source,
        stop: Arc::new(AtomicBool::new(false)),
        started: Instant::now(),
        // The first look at once: the command is the display.
        first_draw: Duration::ZERO,
    };
    let signals = engine.signals().clone();
    watching.run(&|| signals.interrupted())
}

/// Why `orch watch --live` cannot draw.
#[derive(Debug)]
pub enum LiveError {
    /// Standard error is not a terminal (or the setting turns the display off).
    NoTerminal,
    /// The daemon refused (an unknown workflow, say); one that does not answer is waited
    /// for.
    Daemon(ClientError),
}

impl Source {
    /// Looks at the daemon once.
    fn look(&mut self, asker: &mut Asker, elapsed: Duration) -> Result<Frame, ClientError> {
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
    fn look(&mut self, asker: &mut Asker, elapsed: Duration) -> Result<Frame, ClientError> {
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
    let Response::Envs { envs } = asker.ask(&Request::Envs)? else {
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
        .and_then(|p| p.message.as_deref())
        .map(one_line)
        .unwrap_or_default();
    let text = format!(
        "  #{:<5} {}{} {shown} {message}  {}",
        task.id,
        "█".repeat(filled),
        "░".repeat(BAR_WIDTH - filled),
        one_line(&task.spec.describe())
    );
    text
}

/// `text` on one line, safe to print: every control character (a line break, an escape
/// sequence's ESC) becomes a space, so what a task reports can neither break the
/// display's count of lines nor drive the terminal.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// `text` cut to `width` characters (one cell each: the display's own text and what
/// [`one_line`] made of the tasks'), so that no line wraps.
fn clipped(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let kept: String = text.chars().take(width.saturating_sub(1)).collect();
    kept + "…"
}

/// The terminal's width in columns (standard error's), less one so that the last column
/// is never written; 120 when it cannot be told.
fn width() -> usize {
    // SAFETY: TIOCGWINSZ fills the winsize it is given and reads nothing else.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: as above; the pointer is to a live winsize.
    let ok = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    match size.ws_col {
        cols if ok && cols > 1 => usize::from(cols) - 1,
        _ => 120,
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
    let width = width();
    for line in lines {
        out.push_str(&clipped(line, width));
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
