//! Raw frames on the daemon's socket, below the protocol client: for the tests of what a
//! misbehaving client can do (partial, oversized, mutated frames), and the daemon's
//! memory as the kernel reports it.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use orch_protocol::{Hello, PROTOCOL_VERSION};
use serde_json::Value;

use crate::Daemon;

/// A raw socket connection, with a read timeout so a test never hangs.
pub fn raw_socket(daemon: &Daemon) -> UnixStream {
    let stream = UnixStream::connect(daemon.socket()).expect("the socket accepts");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
}

/// `body` as one frame.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut bytes = (body.len() as u32).to_be_bytes().to_vec();
    bytes.extend_from_slice(body);
    bytes
}

/// Sends the handshake and reads the welcome.
pub fn handshake(stream: &mut UnixStream) {
    let hello = Hello {
        protocol: PROTOCOL_VERSION,
        client: "e2e raw".into(),
    };
    stream
        .write_all(&frame(&serde_json::to_vec(&hello).unwrap()))
        .unwrap();
    let welcome = read_frame(stream).expect("a welcome");
    assert_eq!(welcome["protocol"], PROTOCOL_VERSION, "{welcome}");
}

/// The next frame as JSON; `None` when the daemon closed the connection (or it broke).
pub fn read_frame(stream: &mut impl Read) -> Option<Value> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).ok()?;
    let mut body = vec![0u8; u32::from_be_bytes(header) as usize];
    stream.read_exact(&mut body).ok()?;
    Some(serde_json::from_slice(&body).expect("the daemon sends JSON"))
}

/// Reads until the daemon closes the connection; returns the frames it sent first and
/// how long it took.
pub fn frames_until_closed(stream: &mut UnixStream) -> (Vec<Value>, Duration) {
    let start = Instant::now();
    let mut frames = Vec::new();
    while let Some(frame) = read_frame(stream) {
        frames.push(frame);
    }
    (frames, start.elapsed())
}

/// A memory figure of `/proc/<pid>/status` in KiB: `VmRSS` (resident now), `VmHWM`
/// (the peak).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

/// The daemon's resident memory in KiB.
pub fn rss_kib(daemon: &Daemon) -> u64 {
    status_kib(daemon.pid().expect("the daemon runs"), "VmRSS")
}

/// `orch health` answers, from the daemon started last.
pub fn assert_health_answers(daemon: &Daemon) {
    let health = daemon.nu().json("orch health");
    assert_eq!(health["pid"], daemon.pid().unwrap(), "{health}");
}
