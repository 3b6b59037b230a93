//! Frames cannot exhaust the daemon: partial big frames stay inside the global budget of
//! buffered bytes, thousands of mutated frames leave it answering, and a request sent
//! during a wait ends the connection without a desync. Real daemon, real socket.

use std::io::Write;
use std::time::Duration;

use orch_e2e::Daemon;
use orch_e2e::raw::{
    assert_health_answers, frame, frames_until_closed, handshake, raw_socket, read_frame, rss_kib,
};
use orch_protocol::{Request, Response, TaskSpec};

#[test]
fn partial_big_frames_stay_inside_the_buffered_bytes_budget() {
    const CLIENTS: usize = 50;
    const BUDGET: usize = 32 * 1024 * 1024;
    let frame_len: usize = orch_protocol::MAX_FRAME_LEN;
    let daemon = Daemon::start(&[
        "--max-buffered-bytes",
        &BUDGET.to_string(),
        "--read-timeout",
        "5s",
    ]);
    let before = rss_kib(&daemon);
    // Each client announces a 16 MiB frame and sends all of it but the last byte.
    let body = std::sync::Arc::new(vec![b' '; frame_len - 1]);
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let mut stream = raw_socket(&daemon);
            handshake(&mut stream);
            stream
                .set_write_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            stream
        })
        .collect();
    let writers: Vec<_> = clients
        .into_iter()
        .map(|mut stream| {
            let body = body.clone();
            std::thread::spawn(move || {
                let _ = stream.write_all(&(frame_len as u32).to_be_bytes());
                // A daemon that does not read makes the write time out: the client waits.
                let _ = stream.write_all(&body);
                stream
            })
        })
        .collect();
    let clients: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    std::thread::sleep(Duration::from_millis(500));
    let during = rss_kib(&daemon);
    let grown_mib = during.saturating_sub(before) / 1024;
    eprintln!(
        "RSS before {before} KiB, with {CLIENTS} partial 16 MiB frames {during} KiB (+{grown_mib} MiB)"
    );
    assert!(
        grown_mib < (BUDGET / (1024 * 1024)) as u64 + 48,
        "the daemon grew by {grown_mib} MiB holding partial frames (budget {BUDGET} bytes)"
    );
    // Each client ends with a documented error: refused for the budget, or (once a stalled
    // frame before it was cut and gave its bytes back) cut for its own stalled frame.
    let (mut refused_for_budget, mut cut) = (0, 0);
    for mut stream in clients {
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let (frames, _) = frames_until_closed(&mut stream);
        if let Some(reply) = frames.first() {
            let message = reply["message"].as_str().unwrap_or_default();
            if message.contains("--max-buffered-bytes") {
                assert_eq!(reply["kind"], "unavailable", "{reply}");
                refused_for_budget += 1;
            } else {
                assert!(message.contains("--read-timeout"), "{reply}");
                cut += 1;
            }
        }
    }
    eprintln!(
        "of {CLIENTS} clients: {refused_for_budget} refused for the budget, {cut} cut for a stalled frame"
    );
    assert_eq!(refused_for_budget + cut, CLIENTS);
    assert_health_answers(&daemon);
    // The budget is given back: a full-size frame is read (and refused as not JSON).
    let mut stream = raw_socket(&daemon);
    handshake(&mut stream);
    stream.write_all(&frame(&body[..])).unwrap();
    let answer = read_frame(&mut stream).expect("an answer to a full-size frame");
    assert_eq!(answer["kind"], "bad_request", "{answer}");
}

/// Requests the fuzzer starts from: reads and harmless changes only (no shutdown, clean,
/// streams or containers), so a mutation that stays valid cannot stop the test.
const SEEDS: &[&str] = &[
    r#"{"request":"health"}"#,
    r#"{"request":"list","filter":{"status":["queued","failed"],"label":"x","limit":3}}"#,
    r#"{"request":"get","id":1}"#,
    r#"{"request":"cancel","id":1}"#,
    r#"{"request":"retry","id":99}"#,
    r#"{"request":"submit","tasks":[{"kind":{"type":"command","program":"true","args":["a"]},"label":"fuzz","params":{"k":[1,{"x":null}]}}]}"#,
    r#"{"request":"audit","filter":{"action":"submit","limit":2}}"#,
    r#"{"request":"workflows","limit":5}"#,
    r#"{"request":"workflow","id":3}"#,
    r#"{"request":"workflow_plan","workflow":{"kind":"batch","workflow":{"name":"n","operations":[{"id":"a","type":"nu","nu":"print 1","dependencies":[]}]}}}"#,
    r#"{"request":"envs"}"#,
    r#"{"request":"topologies"}"#,
];

/// A small deterministic generator (xorshift), so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A seed with a few random byte-level changes.
fn mutated(rng: &mut Rng) -> Vec<u8> {
    let mut bytes = SEEDS[rng.below(SEEDS.len())].as_bytes().to_vec();
    for _ in 0..=rng.below(4) {
        let at = rng.below(bytes.len());
        match rng.below(5) {
            0 => bytes[at] ^= (rng.next() as u8) | 1,
            1 => bytes.truncate(at),
            2 => bytes.insert(at, rng.next() as u8),
            3 => {
                let end = (at + rng.below(16)).min(bytes.len());
                bytes.drain(at..end);
            }
            _ => {
                let token: &[u8] =
                    [&b"{"[..], b"[", b"\"", b"null", b"-1", b"1e999", b"\\ud800"][rng.below(7)];
                bytes.splice(at..at, token.iter().copied());
            }
        }
        if bytes.is_empty() {
            bytes.push(b'{');
        }
    }
    bytes
}

#[test]
fn thousands_of_mutated_frames_leave_the_daemon_answering() {
    const FRAMES: usize = 3000;
    let daemon = Daemon::start(&["--read-timeout", "2s"]);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut stream = raw_socket(&daemon);
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    handshake(&mut stream);
    let (mut answered, mut errors, mut reconnects) = (0, 0, 0);
    for i in 0..FRAMES {
        let bytes = match i % 50 {
            // Now and then a broken length prefix (the connection is then closed).
            49 => {
                let mut raw = (rng.next() as u32 | 0x0100_0001).to_be_bytes().to_vec();
                raw.extend(mutated(&mut rng));
                raw
            }
            _ => frame(&mutated(&mut rng)),
        };
        let answer = stream
            .write_all(&bytes)
            .ok()
            .and_then(|()| read_frame(&mut stream));
        match answer {
            Some(answer) => {
                answered += 1;
                if answer["response"] == "error" {
                    let kind = answer["kind"].as_str().unwrap_or_default().to_string();
                    assert!(
                        [
                            "bad_request",
                            "not_found",
                            "conflict",
                            "too_large",
                            "permission_denied"
                        ]
                        .contains(&kind.as_str()),
                        "frame {i}: {answer}"
                    );
                    errors += 1;
                    if kind == "too_large" {
                        reconnects += 1;
                        stream = raw_socket(&daemon);
                        handshake(&mut stream);
                    }
                }
            }
            None => {
                reconnects += 1;
                stream = raw_socket(&daemon);
                handshake(&mut stream);
            }
        }
        if i % 500 == 0 {
            let pid = daemon.pid().expect("the daemon runs");
            assert!(
                std::path::Path::new(&format!("/proc/{pid}")).exists(),
                "the daemon died at frame {i}"
            );
        }
    }
    eprintln!(
        "{FRAMES} mutated frames: {answered} answered ({errors} errors), {reconnects} reconnections"
    );
    assert!(answered > FRAMES / 2, "{answered}");
    assert_health_answers(&daemon);
}

/// A client that sends a request while a wait is under way ends its connection at once:
/// the daemon stops the wait and reads nothing more, instead of taking the rest of that
/// frame for the start of another (which left it reading a garbage length until the read
/// timeout, then answering with a refusal).
#[test]
fn a_request_sent_during_a_wait_ends_the_connection_without_a_desync() {
    let daemon = Daemon::start(&[]);
    let submitted = daemon
        .client()
        .call(&Request::Submit {
            tasks: vec![TaskSpec::command("sleep", vec!["30".into()])],
            stashed: false,
        })
        .unwrap();
    let Response::Tasks { tasks, .. } = submitted else {
        panic!("{submitted:?}")
    };
    let mut stream = raw_socket(&daemon);
    handshake(&mut stream);
    let wait = serde_json::json!({"request": "wait", "ids": [tasks[0].id]});
    stream
        .write_all(&frame(wait.to_string().as_bytes()))
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    stream
        .write_all(&frame(br#"{"request":"health"}"#))
        .unwrap();
    let (frames, took) = frames_until_closed(&mut stream);
    assert!(
        frames.is_empty(),
        "nothing is answered after it: {frames:?}"
    );
    assert!(
        took < Duration::from_secs(10),
        "the connection ended only after {took:?}"
    );
    assert_health_answers(&daemon);
}
