//! Requests a standby forwarded to this node (the leader), answered as if their client
//! were connected here: each runs through [`dispatch`](super::dispatch) over one end of a
//! socket pair, with the role the standby gave its client (checked again here), and the
//! frames written to the other end are the answer the standby passes on.

use orch_protocol::{Actor, ErrorKind, ErrorReply, Response};
use tokio::io::AsyncReadExt;
use tokio::net::UnixStream;

use super::{Connection, dispatch, parse_request};
use crate::ops::Context;
use crate::policy::{Role, Submitter};

/// The largest answer forwarded (its frames together): four frames' worth, more than
/// the changes and test environments' answers need; a larger one is replaced by an
/// error saying so.
pub const MAX_FORWARDED_ANSWER: usize = 4 * orch_protocol::MAX_FRAME_LEN;

/// Answers `request` (its JSON) from `actor`, who has `role` and asks as `submitter`
/// (`placed` when the leader sends it about a test environment on this node): the
/// frames the client is to receive.
pub async fn answer(
    ctx: &Context,
    actor: Actor,
    (role, submitter): (Role, Submitter),
    placed: bool,
    request: &[u8],
) -> Vec<u8> {
    let request = match parse_request(request) {
        Ok(request) => request,
        Err(reply) => return error_frames(reply),
    };
    let (ours, theirs) = match UnixStream::pair() {
        Ok(pair) => pair,
        Err(e) => {
            return error_frames(ErrorReply::new(
                ErrorKind::Internal,
                format!("cannot answer a forwarded request: {e}"),
            ));
        }
    };
    let mut conn = Connection::new(ours, actor, role, ctx.limits.clone());
    conn.submitter = submitter;
    conn.forwarded = true;
    conn.placed = placed;
    let reading = tokio::spawn(read_answer(theirs));
    // An error here is the reader's: it stopped reading (the answer is too large).
    let _ = dispatch::dispatch(ctx, &mut conn, request).await;
    drop(conn);
    match reading.await {
        Ok(Ok(frames)) => frames,
        Ok(Err(reply)) => error_frames(reply),
        Err(e) => error_frames(ErrorReply::new(
            ErrorKind::Internal,
            format!("reading a forwarded request's answer failed: {e}"),
        )),
    }
}

/// Everything written to `stream` until it closes, at most [`MAX_FORWARDED_ANSWER`]
/// bytes.
async fn read_answer(mut stream: UnixStream) -> Result<Vec<u8>, ErrorReply> {
    let mut frames = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = stream.read(&mut buffer).await.map_err(|e| {
            ErrorReply::new(
                ErrorKind::Internal,
                format!("reading a forwarded request's answer failed: {e}"),
            )
        })?;
        if n == 0 {
            return Ok(frames);
        }
        if frames.len() + n > MAX_FORWARDED_ANSWER {
            return Err(ErrorReply::new(
                ErrorKind::TooLarge,
                format!(
                    "the answer exceeds the {} MiB a standby may pass on; ask the leader's node directly, or ask for less",
                    MAX_FORWARDED_ANSWER / (1024 * 1024)
                ),
            ));
        }
        frames.extend_from_slice(&buffer[..n]);
    }
}

/// `reply` as the frames of an answer.
pub fn error_frames(reply: ErrorReply) -> Vec<u8> {
    orch_protocol::frame::encode(&Response::Error(reply)).unwrap_or_default()
}

/// The bodies of `frames`, which must be a whole number of frames, none over the frame
/// limit.
pub fn split_frames(mut frames: &[u8]) -> Result<Vec<&[u8]>, String> {
    if frames.is_empty() {
        return Err("no frame".into());
    }
    let mut bodies = Vec::new();
    while !frames.is_empty() {
        let Some((len, rest)) = frames.split_first_chunk::<4>() else {
            return Err("a cut length".into());
        };
        let len = u32::from_be_bytes(*len) as usize;
        if len > orch_protocol::MAX_FRAME_LEN || len > rest.len() {
            return Err(format!("a frame of {len} bytes with {} left", rest.len()));
        }
        bodies.push(&rest[..len]);
        frames = &rest[len..];
    }
    Ok(bodies)
}
