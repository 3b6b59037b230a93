//! Length-prefixed frames: a `u32` big-endian body length, then the body (JSON).
//!
//! Frames longer than [`MAX_FRAME_LEN`] are refused by both sides. The daemon uses an
//! async codec with the same layout; this module is the blocking side.

use std::io::{self, Read, Write};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::MAX_FRAME_LEN;

/// Errors while reading or writing frames.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The socket failed.
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    /// The peer closed the connection.
    #[error("the connection was closed")]
    Closed,
    /// A frame announced a body larger than allowed.
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// The announced length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The body was not valid JSON for the expected type.
    #[error("malformed frame: {0}")]
    Malformed(#[from] serde_json::Error),
    /// The caller asked to stop while waiting.
    #[error("interrupted")]
    Interrupted,
}

/// Encodes `message` as one frame (length prefix and JSON body).
pub fn encode<T: Serialize>(message: &T) -> Result<Vec<u8>, FrameError> {
    let mut buf = vec![0u8; 4];
    serde_json::to_writer(&mut buf, message)?;
    let len = buf.len() - 4;
    if len > MAX_FRAME_LEN {
        return Err(FrameError::TooLarge {
            len,
            max: MAX_FRAME_LEN,
        });
    }
    buf[..4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(buf)
}

/// Writes `message` as one frame.
pub fn write_frame<T: Serialize>(writer: &mut impl Write, message: &T) -> Result<(), FrameError> {
    writer.write_all(&encode(message)?)?;
    Ok(())
}

/// Reads frames from a blocking reader, keeping partial data across read timeouts so that
/// a caller can poll for interruption between reads without losing bytes.
#[derive(Debug, Default)]
pub struct FrameReader {
    buf: Vec<u8>,
}

impl FrameReader {
    /// A reader with an empty buffer.
    pub fn new() -> FrameReader {
        FrameReader::default()
    }

    /// Returns the next complete frame body if the buffer holds one.
    fn take_frame(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        if len > MAX_FRAME_LEN {
            return Err(FrameError::TooLarge {
                len,
                max: MAX_FRAME_LEN,
            });
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let body = self.buf[4..4 + len].to_vec();
        self.buf.drain(..4 + len);
        Ok(Some(body))
    }

    /// Reads one frame and decodes it. Read timeouts on `reader` (`WouldBlock`/`TimedOut`)
    /// call `interrupted`; when it returns true the read stops with
    /// [`FrameError::Interrupted`], and the buffered bytes are kept for the next call.
    pub fn read<T: DeserializeOwned>(
        &mut self,
        reader: &mut impl Read,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<T, FrameError> {
        let mut chunk = [0u8; 64 * 1024];
        loop {
            if let Some(body) = self.take_frame()? {
                return Ok(serde_json::from_slice(&body)?);
            }
            match reader.read(&mut chunk) {
                Ok(0) => return Err(FrameError::Closed),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if is_timeout(&e) => {
                    if interrupted() {
                        return Err(FrameError::Interrupted);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Request;

    fn never() -> bool {
        false
    }

    #[test]
    fn round_trip() {
        let bytes = encode(&Request::Health).unwrap();
        let mut reader = FrameReader::new();
        let got: Request = reader.read(&mut &bytes[..], &never).unwrap();
        assert_eq!(got, Request::Health);
    }

    #[test]
    fn two_frames_in_one_read() {
        let mut bytes = encode(&Request::Health).unwrap();
        bytes.extend(encode(&Request::Shutdown).unwrap());
        let mut reader = FrameReader::new();
        let mut src = &bytes[..];
        assert_eq!(
            reader.read::<Request>(&mut src, &never).unwrap(),
            Request::Health
        );
        assert_eq!(
            reader.read::<Request>(&mut src, &never).unwrap(),
            Request::Shutdown
        );
    }

    #[test]
    fn truncated_frame_reports_closed() {
        let bytes = encode(&Request::Health).unwrap();
        let mut reader = FrameReader::new();
        let err = reader
            .read::<Request>(&mut &bytes[..bytes.len() - 2], &never)
            .unwrap_err();
        assert!(matches!(err, FrameError::Closed), "{err}");
    }

    #[test]
    fn oversized_frame_is_refused_before_reading_the_body() {
        let bytes = ((MAX_FRAME_LEN + 1) as u32).to_be_bytes();
        let mut reader = FrameReader::new();
        let err = reader.read::<Request>(&mut &bytes[..], &never).unwrap_err();
        assert!(matches!(err, FrameError::TooLarge { .. }), "{err}");
    }

    #[test]
    fn malformed_body_is_an_error_not_a_panic() {
        let mut bytes = 5u32.to_be_bytes().to_vec();
        bytes.extend(b"{nope");
        let mut reader = FrameReader::new();
        let err = reader.read::<Request>(&mut &bytes[..], &never).unwrap_err();
        assert!(matches!(err, FrameError::Malformed(_)), "{err}");
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let body = br#"{"request":"get","id":1,"colour":"red"}"#;
        let mut bytes = (body.len() as u32).to_be_bytes().to_vec();
        bytes.extend(body);
        let mut reader = FrameReader::new();
        let err = reader.read::<Request>(&mut &bytes[..], &never).unwrap_err();
        assert!(err.to_string().contains("colour"), "{err}");
    }

    #[test]
    fn encoding_an_oversized_message_fails() {
        let huge = crate::TaskSpec::command("x".repeat(MAX_FRAME_LEN), vec![]);
        let err = encode(&Request::Submit {
            tasks: vec![huge],
            stashed: false,
        })
        .unwrap_err();
        assert!(matches!(err, FrameError::TooLarge { .. }));
    }
}
