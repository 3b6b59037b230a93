//! One client connection: length-prefixed JSON frames over the Unix socket, read under
//! the connection limits (timeouts and the shared budget of buffered bytes).

use std::sync::Arc;
use std::time::Duration;

use orch_protocol::{Actor, ErrorKind, ErrorReply, MAX_FRAME_LEN, Response, Task};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::time::Instant;

use super::limits::{Limits, Reservation};

/// The size of JSON after which a task list is continued in another frame.
pub const TASKS_PART_BYTES: usize = 1024 * 1024;

/// A framed connection to one client.
pub struct Connection {
    stream: UnixStream,
    /// Set once the client sent something while a stream or a long answer was under way:
    /// the frame boundary is lost, so nothing more is read.
    interrupted: bool,
    limits: Arc<Limits>,
    /// Who is on the other end (for the audit log).
    pub actor: Actor,
    /// What the peer may do (the owner: admin; others: their `--allow-user` role).
    pub role: crate::policy::Role,
    /// Which directories the peer's workflows may name (the owner's: any).
    pub submitter: crate::policy::Submitter,
    /// The requests come from another node of the cluster (a forward), not a client:
    /// they are answered here, never forwarded again.
    pub forwarded: bool,
    /// A request the leader sent this node about a test environment on its container
    /// engine: carried out here, whatever the node's part.
    pub placed: bool,
}

/// A received frame body, holding its share of the buffered-bytes budget until dropped.
pub struct Frame {
    /// The body (JSON).
    pub body: Vec<u8>,
    _reservation: Reservation,
}

/// Why no frame was received.
#[derive(Debug)]
pub enum RecvError {
    /// The client hung up, or the stream broke.
    Closed,
    /// Nothing came within the idle timeout (close without a word).
    Idle,
    /// The frame cannot be read (too large, too slow, no room in the budget): the reply to
    /// send before closing, since the frame boundary is lost.
    Refused(ErrorReply),
}

/// How long the next frame may take.
#[derive(Debug, Clone, Copy)]
pub enum Patience {
    /// The whole frame by this instant (the handshake).
    Until(Instant),
    /// The first byte within this, then the rest within the read timeout.
    Idle(Duration),
}

impl Connection {
    /// Wraps an accepted stream from `actor`, who has `role`, held to `limits`.
    pub fn new(
        stream: UnixStream,
        actor: Actor,
        role: crate::policy::Role,
        limits: Arc<Limits>,
    ) -> Connection {
        let submitter = crate::policy::Submitter::of_socket_peer(actor.uid);
        Connection {
            stream,
            interrupted: false,
            limits,
            actor,
            role,
            submitter,
            forwarded: false,
            placed: false,
        }
    }

    /// The limits this connection is held to.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The next frame. Its declared length is taken from the shared budget before its body
    /// is read (waiting for room until the read deadline).
    pub async fn recv(&mut self, patience: Patience) -> Result<Frame, RecvError> {
        if self.interrupted {
            return Err(RecvError::Closed);
        }
        let mut header = [0u8; 4];
        let (first, deadline) = match patience {
            Patience::Until(deadline) => (deadline, Some(deadline)),
            Patience::Idle(idle) => (Instant::now() + idle, None),
        };
        let got = match tokio::time::timeout_at(first, self.stream.read(&mut header)).await {
            Ok(Ok(0) | Err(_)) => return Err(RecvError::Closed),
            Ok(Ok(n)) => n,
            Err(_) if deadline.is_some() => return Err(self.too_slow()),
            Err(_) => return Err(RecvError::Idle),
        };
        let deadline = deadline.unwrap_or_else(|| Instant::now() + self.limits.read_timeout);
        self.read_exact_by(&mut header[got..], deadline).await?;
        let len = u32::from_be_bytes(header) as usize;
        if len > MAX_FRAME_LEN {
            return Err(RecvError::Refused(ErrorReply::new(
                ErrorKind::TooLarge,
                format!(
                    "frame refused: a frame of {len} bytes exceeds the limit of {MAX_FRAME_LEN} bytes"
                ),
            )));
        }
        let patience = deadline.saturating_duration_since(Instant::now());
        let reservation = self
            .limits
            .budget
            .reserve(len, patience)
            .await
            .map_err(RecvError::Refused)?;
        let mut body = vec![0u8; len];
        self.read_exact_by(&mut body, deadline).await?;
        Ok(Frame {
            body,
            _reservation: reservation,
        })
    }

    /// Fills `buf` before `deadline`.
    async fn read_exact_by(&mut self, buf: &mut [u8], deadline: Instant) -> Result<(), RecvError> {
        match tokio::time::timeout_at(deadline, self.stream.read_exact(buf)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(RecvError::Closed),
            Err(_) => Err(self.too_slow()),
        }
    }

    /// The refusal of a frame that did not arrive in time.
    fn too_slow(&self) -> RecvError {
        RecvError::Refused(ErrorReply::new(
            ErrorKind::BadRequest,
            format!(
                "closing the connection: a frame did not arrive in time (the handshake must arrive within {} of connecting (--handshake-timeout), a request within {} of its first byte (--read-timeout))",
                humantime::format_duration(self.limits.handshake_timeout),
                humantime::format_duration(self.limits.read_timeout)
            ),
        ))
    }

    /// Keeps this connection open until the process exits (the kernel closes it then), so
    /// that its client sees the end of the stream exactly when the daemon has exited,
    /// whatever pid namespace it is in. Used by `Shutdown`.
    pub fn hold_open_until_exit(&self) -> std::io::Result<()> {
        use std::os::fd::AsFd as _;
        let fd = self.stream.as_fd().try_clone_to_owned()?;
        // Deliberately never closed: it ends with the process (close-on-exec, so no task
        // process inherits it).
        std::mem::forget(fd);
        Ok(())
    }

    /// Sends an operation's failure as an error frame.
    pub async fn send_error(&mut self, error: crate::ops::AppError) -> std::io::Result<()> {
        self.send(&Response::Error(error.reply())).await
    }

    /// Sends one response, with its secrets redacted unless the peer is an admin.
    pub async fn send(&mut self, response: &Response) -> std::io::Result<()> {
        let response = crate::redact::for_role(self.role, response);
        self.send_json(&*response).await
    }

    /// Sends any serializable value as one frame; an answer too large for a frame is
    /// replaced by an error saying so (the connection stays usable).
    pub async fn send_json<T: Serialize>(&mut self, value: &T) -> std::io::Result<()> {
        let body = serde_json::to_vec(value).map_err(std::io::Error::other)?;
        self.send_frame(body).await.map(|_| ())
    }

    /// Writes one frame: the length, then `body` (at most the frame limit).
    async fn write_frame(&mut self, body: &[u8]) -> std::io::Result<()> {
        let len = u32::try_from(body.len())
            .ok()
            .filter(|&len| len as usize <= MAX_FRAME_LEN)
            .ok_or_else(|| {
                std::io::Error::other(format!(
                    "an answer of {} bytes exceeds the frame limit of {MAX_FRAME_LEN} bytes",
                    body.len()
                ))
            })?;
        self.stream.write_all(&len.to_be_bytes()).await?;
        self.stream.write_all(body).await
    }

    /// Sends frames another node encoded (a forwarded request's answer), each checked
    /// against the frame limit first; an error instead when they are not well formed.
    pub async fn send_frames(&mut self, frames: &[u8]) -> std::io::Result<()> {
        if let Err(problem) = super::forwarded::split_frames(frames) {
            let reply = ErrorReply::new(
                ErrorKind::Internal,
                format!("the leader's answer to a forwarded request is not well formed: {problem}"),
            );
            return self.send(&orch_protocol::Response::Error(reply)).await;
        }
        self.stream.write_all(frames).await
    }

    /// Sends a task list in parts (see [`Connection::send_list`]), with secrets redacted
    /// unless the peer is an admin.
    pub async fn send_tasks(&mut self, tasks: &[Task]) -> std::io::Result<()> {
        let role = self.role;
        let tasks: Vec<_> = tasks
            .iter()
            .map(|task| crate::redact::for_role(role, task))
            .collect();
        self.send_list("tasks", &tasks).await
    }

    /// Sends a list as `{"response": name, "more": .., name: [..]}` frames of at most
    /// about [`TASKS_PART_BYTES`] of JSON each, so that no frame nears the limit however
    /// long the list is; `more` says another part follows. A part too large for a frame
    /// (an item too large on its own) is replaced by an error that ends the list.
    pub async fn send_list<T: Serialize>(
        &mut self,
        name: &str,
        items: &[T],
    ) -> std::io::Result<()> {
        let mut part: Vec<u8> = Vec::new();
        let mut count = 0;
        for item in items {
            let body = serde_json::to_vec(item).map_err(std::io::Error::other)?;
            if count > 0 && part.len() + body.len() > TASKS_PART_BYTES {
                if !self.send_part(name, &part, true).await? {
                    return Ok(());
                }
                part.clear();
                count = 0;
            }
            if count > 0 {
                part.push(b',');
            }
            part.extend_from_slice(&body);
            count += 1;
        }
        self.send_part(name, &part, false).await.map(|_| ())
    }

    /// One part of a list around already-serialized, comma-separated items; false when
    /// it was too large and an error went instead.
    async fn send_part(&mut self, name: &str, items: &[u8], more: bool) -> std::io::Result<bool> {
        let mut frame = Vec::with_capacity(items.len() + 48);
        frame.extend_from_slice(br#"{"response":""#);
        frame.extend_from_slice(name.as_bytes());
        frame.extend_from_slice(br#"","more":"#);
        frame.extend_from_slice(if more { b"true" } else { b"false" });
        frame.extend_from_slice(br#",""#);
        frame.extend_from_slice(name.as_bytes());
        frame.extend_from_slice(br#"":["#);
        frame.extend_from_slice(items);
        frame.extend_from_slice(b"]}");
        self.send_frame(frame).await
    }

    /// Sends one frame body, or, when it exceeds the frame limit, an error answer that
    /// says so and how to ask for less; false in that case.
    async fn send_frame(&mut self, body: Vec<u8>) -> std::io::Result<bool> {
        if body.len() <= MAX_FRAME_LEN {
            return self.write_frame(&body).await.map(|()| true);
        }
        tracing::warn!(bytes = body.len(), "an answer exceeded the frame limit");
        let error = Response::Error(too_large(body.len()));
        let body = serde_json::to_vec(&error).map_err(std::io::Error::other)?;
        self.write_frame(&body).await.map(|()| false)
    }

    /// Waits until the client sends anything or hangs up (streams use this to stop). The
    /// connection reads nothing more afterwards: what the client sent may be the start of
    /// a frame whose rest is not read here.
    pub async fn closed(&mut self) {
        let mut byte = [0u8; 1];
        let _ = self.stream.read(&mut byte).await;
        self.interrupted = true;
    }
}

/// The error that replaces an answer of `len` bytes, too large for a frame.
fn too_large(len: usize) -> ErrorReply {
    ErrorReply::new(
        ErrorKind::TooLarge,
        format!(
            "the answer ({len} bytes) exceeds the frame limit of {MAX_FRAME_LEN} bytes; ask for less: \
             a workflow's steps in pages (`orch workflow show ID --offset N --limit M`, \
             `GET /tasks/ID?offset=N&limit=M`), fewer items (`--limit`)"
        ),
    )
}
