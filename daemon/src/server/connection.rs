//! One client connection: length-prefixed JSON frames over the Unix socket.

use bytes::{Bytes, BytesMut};
use futures_util::{SinkExt, StreamExt};
use orch_protocol::{ErrorKind, ErrorReply, MAX_FRAME_LEN, Response};
use serde::Serialize;
use tokio::net::UnixStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

/// A framed connection to one client.
pub struct Connection {
    framed: Framed<UnixStream, LengthDelimitedCodec>,
}

impl Connection {
    /// Wraps an accepted stream.
    pub fn new(stream: UnixStream) -> Connection {
        let codec = LengthDelimitedCodec::builder()
            .length_field_length(4)
            .big_endian()
            .max_frame_length(MAX_FRAME_LEN)
            .new_codec();
        Connection {
            framed: Framed::new(stream, codec),
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

    /// Sends any serializable value as one frame.
    pub async fn send_json<T: Serialize>(&mut self, value: &T) -> std::io::Result<()> {
        let body = serde_json::to_vec(value).map_err(std::io::Error::other)?;
        self.framed.send(Bytes::from(body)).await
    }

    /// Waits until the client sends anything or hangs up (streams use this to stop).
    pub async fn closed(&mut self) {
        let _ = self.framed.next().await;
    }
}
