//! One try of a notification: a signed POST to a webhook, or a local command with the
//! notification on its standard input. Each is bounded in time.

use std::sync::{Arc, Mutex};
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

/// The most of a failed command's standard error shown in the error.
const STDERR_TAIL: usize = 512;

/// Sends `entry` to `target`: `Ok` once it was delivered (a 2xx answer, or exit 0).
pub async fn send(target: &NotifyTarget, entry: &OutboxEntry) -> Result<(), String> {
    match target {
        NotifyTarget::Webhook { url, secret } => {
            let sent = tokio::time::timeout(TRY_TIMEOUT, post(url, secret, entry)).await;
            sent.unwrap_or_else(|_| Err(no_answer()))
        }
        NotifyTarget::Command { command } => run(command, entry).await,
    }
}

fn no_answer() -> String {
    format!("no answer within {}s", TRY_TIMEOUT.as_secs())
}

/// `sha256=` and the hex HMAC-SHA256, keyed by `secret`, of `timestamp`, a dot and
/// `body` (the timestamp is sent as `X-Orch-Timestamp`: a receiver refuses old ones, so a
/// captured notification cannot be replayed later).
pub fn signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = <Hmac<sha2_hmac::Sha256> as KeyInit>::new_from_slice(secret.as_bytes())
        .expect("HMAC takes keys of any length");
    mac.update(format!("{timestamp}.").as_bytes());
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// POSTs the notification to `url`, signed with `secret`.
async fn post(url: &str, secret: &str, entry: &OutboxEntry) -> Result<(), String> {
    let uri: hyper::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let host = uri.host().ok_or("the URL has no host")?;
    // An IPv6 address comes in brackets.
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
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
    let timestamp = chrono::Utc::now().timestamp();
    let request = Request::post(path)
        .header(HOST, authority.as_str())
        .header(CONTENT_TYPE, "application/json")
        .header(
            USER_AGENT,
            concat!("provisioning-orchestrator/", env!("CARGO_PKG_VERSION")),
        )
        .header("X-Orch-Delivery", entry.key.as_str())
        .header("X-Orch-Event", entry.event.as_str())
        .header("X-Orch-Timestamp", timestamp.to_string())
        .header("X-Orch-Signature", signature(secret, timestamp, &body))
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

/// Runs `command` in a process group of its own, with the notification on its standard
/// input; past [`TRY_TIMEOUT`] the whole group is killed.
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
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{program}: {e}"))?;
    let group = child.id();
    let stdin = child.stdin.take();
    let body = entry.body.clone();
    // Written while the command runs: one that does not read it is not a failure.
    let writer = tokio::spawn(async move {
        if let Some(mut stdin) = stdin {
            let _ = stdin.write_all(body.as_bytes()).await;
        }
    });
    let errors = Arc::new(Mutex::new(Vec::new()));
    let reader = tokio::spawn(read_tail(child.stderr.take(), errors.clone()));
    let status = match tokio::time::timeout(TRY_TIMEOUT, child.wait()).await {
        Ok(status) => status.map_err(|e| format!("{program}: {e}"))?,
        Err(_) => {
            kill_group(group);
            writer.abort();
            reader.abort();
            return Err(no_answer());
        }
    };
    writer.abort();
    // A background child may hold stderr open: what came so far, soon, is enough.
    let _ = tokio::time::timeout(STDERR_GRACE, reader).await;
    if status.success() {
        return Ok(());
    }
    let text =
        String::from_utf8_lossy(&errors.lock().unwrap_or_else(|e| e.into_inner())).into_owned();
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

/// How long the end of a command's standard error is still read after it exited.
const STDERR_GRACE: Duration = Duration::from_millis(200);

/// Reads `stderr` into `kept`, keeping its last 64 KiB.
async fn read_tail(stderr: Option<tokio::process::ChildStderr>, kept: Arc<Mutex<Vec<u8>>>) {
    let Some(mut stderr) = stderr else { return };
    let mut chunk = [0u8; 4096];
    while let Ok(n) = stderr.read(&mut chunk).await {
        if n == 0 {
            return;
        }
        let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.extend_from_slice(&chunk[..n]);
        let excess = kept.len().saturating_sub(64 * 1024);
        kept.drain(..excess);
    }
}

/// SIGKILL to the process group `group` leads.
fn kill_group(group: Option<u32>) {
    if let Some(pid) = group.and_then(|p| libc::pid_t::try_from(p).ok()) {
        // SAFETY: kill(2) has no memory-safety preconditions; the group is the command's.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_the_hmac_sha256_of_the_body() {
        // RFC 4231, test case 2.
        // RFC 4231's test case 2 is the HMAC of the whole message: here "0." and the rest.
        let signed = signature("Jefe", 0, b"what do ya want for nothing?");
        let mut mac = <Hmac<sha2_hmac::Sha256> as KeyInit>::new_from_slice(b"Jefe").unwrap();
        mac.update(b"0.what do ya want for nothing?");
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(signed, format!("sha256={hex}"));
        let plain = <Hmac<sha2_hmac::Sha256> as KeyInit>::new_from_slice(b"Jefe")
            .unwrap()
            .chain_update(b"what do ya want for nothing?")
            .finalize()
            .into_bytes();
        let plain: String = plain.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            plain,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
