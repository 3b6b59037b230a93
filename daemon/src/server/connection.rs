//! One client connection: length-prefixed JSON frames over the Unix socket.

use bytes::{Bytes, BytesMut};
use futures_util::{SinkExt, StreamExt};
use orch_protocol::{Actor, ErrorKind, ErrorReply, MAX_FRAME_LEN, Response, Task};
use serde::Serialize;
use tokio::net::UnixStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

/// The size of JSON after which a task list is continued in another frame.
pub const TASKS_PART_BYTES: usize = 1024 * 1024;

/// A framed connection to one client.
pub struct Connection {
    framed: Framed<UnixStream, LengthDelimitedCodec>,
    /// Who is on the other end (for the audit log).
    pub actor: Actor,
    /// What the peer may do (the owner: admin; others: their `--allow-user` role).
    pub role: crate::http::auth::Role,
}

impl Connection {
    /// Wraps an accepted stream from `actor`, who has `role`.
    pub fn new(stream: UnixStream, actor: Actor, role: crate::http::auth::Role) -> Connection {
        let codec = LengthDelimitedCodec::builder()
            .length_field_length(4)
            .big_endian()
            .max_frame_length(MAX_FRAME_LEN)
            .new_codec();
        Connection {
            framed: Framed::new(stream, codec),
            actor,
            role,
        }
    }

    /// The next frame body; `None` when the client hung up. A frame that cannot be read
    /// (too large, or a broken stream) is an error reply to send before closing.
    pub async fn recv(&mut self) -> Option<Result<BytesMut, ErrorReply>> {
        match self.framed.next().await? {
            Ok(frame) => Some(Ok(frame)),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => Some(Err(ErrorReply::new(
                ErrorKind::TooLarge,
                format!("frame refused: {e} (the limit is {MAX_FRAME_LEN} bytes)"),
            ))),
            Err(_) => None,
        }
    }

    /// Keeps this connection open until the process exits (the kernel closes it then), so
    /// that its client sees the end of the stream exactly when the daemon has exited,
    /// whatever pid namespace it is in. Used by `Shutdown`.
    pub fn hold_open_until_exit(&self) -> std::io::Result<()> {
        use std::os::fd::AsFd as _;
        let fd = self.framed.get_ref().as_fd().try_clone_to_owned()?;
        // Deliberately never closed: it ends with the process (close-on-exec, so no task
        // process inherits it).
        std::mem::forget(fd);
        Ok(())
    }

    /// Sends one response.
    pub async fn send(&mut self, response: &Response) -> std::io::Result<()> {
        self.send_json(response).await
    }

    /// Sends any serializable value as one frame.
    pub async fn send_json<T: Serialize>(&mut self, value: &T) -> std::io::Result<()> {
        let body = serde_json::to_vec(value).map_err(std::io::Error::other)?;
        self.framed.send(Bytes::from(body)).await
    }

    /// Sends a task list in parts of at most about [`TASKS_PART_BYTES`] of JSON each, so
    /// that no frame nears the limit however long the list is.
    pub async fn send_tasks(&mut self, tasks: &[Task]) -> std::io::Result<()> {
        let mut part: Vec<u8> = Vec::new();
        let mut count = 0;
        for task in tasks {
            let body = serde_json::to_vec(task).map_err(std::io::Error::other)?;
            if count > 0 && part.len() + body.len() > TASKS_PART_BYTES {
                self.send_tasks_part(&part, true).await?;
                part.clear();
                count = 0;
            }
            if count > 0 {
                part.push(b',');
            }
            part.extend_from_slice(&body);
            count += 1;
        }
        self.send_tasks_part(&part, false).await
    }

    /// One `Tasks` frame around already-serialized, comma-separated task records.
    async fn send_tasks_part(&mut self, items: &[u8], more: bool) -> std::io::Result<()> {
        let mut frame = Vec::with_capacity(items.len() + 48);
        frame.extend_from_slice(br#"{"response":"tasks","more":"#);
        frame.extend_from_slice(if more { b"true" } else { b"false" });
        frame.extend_from_slice(br#","tasks":["#);
        frame.extend_from_slice(items);
        frame.extend_from_slice(b"]}");
        self.framed.send(Bytes::from(frame)).await
    }

    /// Waits until the client sends anything or hangs up (streams use this to stop).
    pub async fn closed(&mut self) {
        let _ = self.framed.next().await;
    }
}
