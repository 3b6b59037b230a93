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

    /// Sends one response.
    pub async fn send(&mut self, response: &Response) -> std::io::Result<()> {
        self.send_json(response).await
    }

    /// Sends any serializable value as one frame; an answer too large for a frame is
    /// replaced by an error saying so (the connection stays usable).
    pub async fn send_json<T: Serialize>(&mut self, value: &T) -> std::io::Result<()> {
        let body = serde_json::to_vec(value).map_err(std::io::Error::other)?;
        self.send_frame(body).await.map(|_| ())
    }

    /// Sends a task list in parts (see [`Connection::send_list`]).
    pub async fn send_tasks(&mut self, tasks: &[Task]) -> std::io::Result<()> {
        self.send_list("tasks", tasks).await
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
            return self.framed.send(Bytes::from(body)).await.map(|()| true);
        }
        tracing::warn!(bytes = body.len(), "an answer exceeded the frame limit");
        let error = Response::Error(too_large(body.len()));
        let body = serde_json::to_vec(&error).map_err(std::io::Error::other)?;
        self.framed.send(Bytes::from(body)).await.map(|()| false)
    }

    /// Waits until the client sends anything or hangs up (streams use this to stop).
    pub async fn closed(&mut self) {
        let _ = self.framed.next().await;
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
