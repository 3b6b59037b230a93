//! A task's standard input when it was submitted with `stdin` (`orch submit --stdin`): a
//! pipe the runner holds, written by a task of its own with what `orch send` asks for,
//! in order, and closed at the end of input (even when that input itself was dropped:
//! the writer closes the pipe once it has written what it holds). A write waits for the
//! task to read; while it waits, at most [`PENDING`] more inputs are held, and later ones
//! are dropped with a line in the task's log saying so. A task without a pipe gets a line
//! for each input. The writer stops when the attempt ends ([`Input::close`]).

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
    /// The writer, stopped when the attempt ends.
    writer: Option<tokio::task::AbortHandle>,
    log: SharedLog,
}

impl Input {
    /// Starts the writer of `stdin` (none for a task without a pipe); problems go to
    /// `log`.
    pub(super) fn start(stdin: Option<ChildStdin>, log: SharedLog) -> Input {
        let (queue, writer) = match stdin {
            Some(stdin) => {
                let (queue, inputs) = mpsc::channel(PENDING);
                let writer = tokio::spawn(write_all(stdin, inputs, log.clone()));
                (Some(queue), Some(writer.abort_handle()))
            }
            None => (None, None),
        };
        Input { queue, writer, log }
    }

    /// Stops the writer (the attempt ended: what it still holds goes nowhere, and a
    /// leftover process holding the pipe open cannot keep it waiting).
    pub(super) fn close(&mut self) {
        self.queue = None;
        if let Some(writer) = self.writer.take() {
            writer.abort();
        }
    }

    /// Queues `data` for the task's standard input, closed after it when `eof`.
    pub(super) fn send(&mut self, data: String, eof: bool) {
        let Some(queue) = &self.queue else {
            return self.note("input dropped: the task's standard input is closed");
        };
        let sent = queue.try_send((data, eof));
        if eof {
            // Without the queue, the writer closes the pipe after what it holds.
            self.queue = None;
        }
        match sent {
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

#[cfg(test)]
mod tests {
    use std::process::Stdio;

    use super::*;
    use crate::runner::log::TaskLog;

    /// A task that reads nothing for a while, then counts what it read until the end of
    /// its input: an end of input dropped for lack of room still ends it, and the
    /// inputs past the room are dropped with a line in its log.
    #[tokio::test]
    async fn an_end_of_input_that_finds_no_room_still_closes_the_pipe() {
        let dir = tempfile::tempdir().unwrap();
        let log = TaskLog::shared(dir.path().join("log"), 1, 1 << 20);
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", "sleep 0.5; wc -c"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = Input::start(child.stdin.take(), log.clone());
        let chunk = "x".repeat(orch_protocol::MAX_INPUT_BYTES);
        for _ in 0..PENDING + 8 {
            input.send(chunk.clone(), false);
        }
        input.send(String::new(), true);
        let output =
            tokio::time::timeout(std::time::Duration::from_secs(20), child.wait_with_output())
                .await
                .expect("the task sees the end of its input")
                .unwrap();
        let read: usize = String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .unwrap();
        assert_eq!(read % chunk.len(), 0, "whole inputs only");
        assert!(
            read >= PENDING * chunk.len(),
            "{read}: the queued inputs are written"
        );
        assert!(
            read < (PENDING + 8) * chunk.len(),
            "{read}: some were dropped"
        );
        let text = std::fs::read_to_string(dir.path().join("log")).unwrap();
        assert!(
            text.contains("input dropped: the task has not read"),
            "{text}"
        );
    }
}
