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
//!
//! - [`sources`]: what a display looks at (the tasks waited for, the queue, a workflow, a
//!   test environment being created) and how it counts them;
//! - [`draw`]: its lines on the terminal (bars, one plain line per task, cut to the
//!   terminal's width) and their clearing.

mod draw;
mod sources;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nu_plugin::EngineInterface;
use nu_protocol::Value;
use orch_protocol::{ClientError, TaskId};

use draw::{lines, redraw};
use sources::{Asker, Frame};
pub use sources::{Source, TaskPoll};

/// How often the display is redrawn.
const TICK: Duration = Duration::from_millis(250);

/// Nothing is drawn for a wait shorter than this (no flicker for quick ones).
const FIRST_DRAW: Duration = Duration::from_millis(300);

/// The most bars drawn.
const BARS: usize = 8;

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
