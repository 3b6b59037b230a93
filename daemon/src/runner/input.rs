//! A task's standard input when it was submitted with `stdin` (`orch submit --stdin`): a
//! pipe the runner holds, written by a task of its own with what `orch send` asks for,
//! in order, and closed at the end of input. A write waits for the task to read; while
//! it waits, at most [`PENDING`] more inputs are held, and later ones are dropped with a
//! line in the task's log saying so. A task without a pipe gets a line for each input.

use tokio::io::AsyncWriteExt as _;
use tokio::process::ChildStdin;
use tokio::sync::mpsc;

use super::log::{SharedLog, lock};

/// How many inputs wait for a task that does not read (each at most
/// [`orch_protocol::MAX_INPUT_BYTES`]).
const PENDING: usize = 16;

/// The writing end of an attempt's standard input.
pub(super) struct Input {
    /// The writer's queue (none: no pipe, or the input has ended).
    queue: Option<mpsc::Sender<(String, bool)>>,
    log: SharedLog,
}

impl Input {
    /// Starts the writer of `stdin` (none for a task without a pipe); problems go to
    /// `log`.
    pub(super) fn start(stdin: Option<ChildStdin>, log: SharedLog) -> Input {
        let queue = stdin.map(|stdin| {
            let (queue, inputs) = mpsc::channel(PENDING);
            tokio::spawn(write_all(stdin, inputs, log.clone()));
            queue
        });
        Input { queue, log }
    }

    /// Queues `data` for the task's standard input, closed after it when `eof`.
    pub(super) fn send(&mut self, data: String, eof: bool) {
        let Some(queue) = &self.queue else {
            return self.note("input dropped: the task's standard input is closed");
        };
        match queue.try_send((data, eof)) {
            Ok(()) if eof => self.queue = None,
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.note("input dropped: the task has not read the input sent before")
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.queue = None;
                self.note("input dropped: the task's standard input is closed");
            }
        }
    }

    fn note(&self, what: &str) {
        lock(&self.log).write(format!("orch: {what}\n").as_bytes());
    }
}

/// Writes each input to `stdin` until the end of input, or until the task closes it.
async fn write_all(
    mut stdin: ChildStdin,
    mut inputs: mpsc::Receiver<(String, bool)>,
    log: SharedLog,
) {
    while let Some((data, eof)) = inputs.recv().await {
        let written = async {
            stdin.write_all(data.as_bytes()).await?;
            stdin.flush().await
        };
        if written.await.is_err() {
            let line = "orch: input not written: the task closed its standard input\n";
            lock(&log).write(line.as_bytes());
            return;
        }
        if eof {
            return;
        }
    }
}
