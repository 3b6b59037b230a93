//! One try of a notification: a signed POST to a webhook, or a local command with the
//! notification on its standard input. Each is bounded in time.

use std::time::Duration;

use bytes::Bytes;
use hmac::{Hmac, KeyInit, Mac};
use http_body_util::Full;
use hyper::Request;
use hyper::header::{CONTENT_TYPE, HOST, USER_AGENT};
use hyper_util::rt::TokioIo;
use orch_protocol::{NotifyTarget, OutboxEntry};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long one try may take (connecting, sending, the answer's head; a command's run).
pub const TRY_TIMEOUT: Duration = Duration::from_secs(10);

/// The most of a failed command's standard error kept in the error.
const STDERR_TAIL: usize = 512;

/// Sends `entry` to `target`: `Ok` once it was delivered (a 2xx answer, or exit 0).
pub async fn send(target: &NotifyTarget, entry: &OutboxEntry) -> Result<(), String> {
    let sent = match target {
        NotifyTarget::Webhook { url, secret } => {
            tokio::time::timeout(TRY_TIMEOUT, post(url, secret, entry)).await
        }
        NotifyTarget::Command { command } => {
            tokio::time::timeout(TRY_TIMEOUT, run(command, entry)).await
        }
    };
    sent.unwrap_or_else(|_| Err(format!("no answer within {}s", TRY_TIMEOUT.as_secs())))
}

/// `sha256=` and the hex HMAC-SHA256 of `body` keyed by `secret`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = <Hmac<sha2_hmac::Sha256> as KeyInit>::new_from_slice(secret.as_bytes())
        .expect("HMAC takes keys of any length");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// POSTs the notification to `url`, signed with `secret`.
async fn post(url: &str, secret: &str, entry: &OutboxEntry) -> Result<(), String> {
    let uri: hyper::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let host = uri.host().ok_or("the URL has no host")?.to_string();
    let port = uri.port_u16().unwrap_or(80);
    let authority = uri.authority().map(|a| a.to_string()).unwrap_or_default();
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    let stream = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot connect to {authority}: {e}"))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("{authority}: {e}"))?;
    tokio::spawn(connection);
    let body = Bytes::from(entry.body.clone());
    let request = Request::post(path)
        .header(HOST, authority.as_str())
        .header(CONTENT_TYPE, "application/json")
        .header(
            USER_AGENT,
            concat!("provisioning-orchestrator/", env!("CARGO_PKG_VERSION")),
        )
        .header("X-Orch-Delivery", entry.key.as_str())
        .header("X-Orch-Event", entry.event.as_str())
        .header("X-Orch-Signature", signature(secret, &body))
        .body(Full::new(body))
        .map_err(|e| e.to_string())?;
    let answer = sender
        .send_request(request)
        .await
        .map_err(|e| format!("{authority}: {e}"))?;
    if answer.status().is_success() {
        Ok(())
    } else {
        Err(format!("{authority} answered {}", answer.status()))
    }
}

/// Runs `command` with the notification on its standard input.
async fn run(command: &[String], entry: &OutboxEntry) -> Result<(), String> {
    let (program, args) = command.split_first().ok_or("the command is empty")?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .env("ORCH_DELIVERY", &entry.key)
        .env("ORCH_NOTIFIER", &entry.notifier)
        .env("ORCH_EVENT", &entry.event)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{program}: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that does not read its input is not a failure.
        let _ = stdin.write_all(entry.body.as_bytes()).await;
    }
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let mut errors = Vec::new();
    let read = async {
        let _ = (&mut stderr).take(64 * 1024).read_to_end(&mut errors).await;
    };
    let (status, ()) = tokio::join!(child.wait(), read);
    let status = status.map_err(|e| format!("{program}: {e}"))?;
    if status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&errors);
    let tail: String = text
        .trim()
        .chars()
        .rev()
        .take(STDERR_TAIL)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    Err(format!("{program} ended with {status}: {tail}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_the_hmac_sha256_of_the_body() {
        // RFC 4231, test case 2.
        let signed = signature("Jefe", b"what do ya want for nothing?");
        assert_eq!(
            signed,
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
