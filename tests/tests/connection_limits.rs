//! Connections cannot exhaust the daemon: slow and silent clients are cut after their
//! timeouts, clients past the connection caps get a clear refusal, partial frames stay
//! inside a global budget of buffered bytes, and thousands of mutated frames leave the
//! daemon answering. Real daemon, real sockets, real HTTP, real `nu` with the plugin.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use orch_e2e::Daemon;
use orch_protocol::{ClientError, ErrorKind, Hello, PROTOCOL_VERSION, Request, Response, TaskSpec};
use serde_json::Value;

/// A raw socket connection, with a read timeout so a test never hangs.
fn raw_socket(daemon: &Daemon) -> UnixStream {
    let stream = UnixStream::connect(daemon.socket()).expect("the socket accepts");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
}

/// `body` as one frame.
fn frame(body: &[u8]) -> Vec<u8> {
    let mut bytes = (body.len() as u32).to_be_bytes().to_vec();
    bytes.extend_from_slice(body);
    bytes
}

/// Sends the handshake and reads the welcome.
fn handshake(stream: &mut UnixStream) {
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
fn read_frame(stream: &mut impl Read) -> Option<Value> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).ok()?;
    let mut body = vec![0u8; u32::from_be_bytes(header) as usize];
    stream.read_exact(&mut body).ok()?;
    Some(serde_json::from_slice(&body).expect("the daemon sends JSON"))
}

/// Reads until the daemon closes the connection; returns the frames it sent first and
/// how long it took.
fn frames_until_closed(stream: &mut UnixStream) -> (Vec<Value>, Duration) {
    let start = Instant::now();
    let mut frames = Vec::new();
    while let Some(frame) = read_frame(stream) {
        frames.push(frame);
    }
    (frames, start.elapsed())
}

/// Reads an HTTP answer until the server closes; `None` if it never answers in time.
fn http_answer_until_closed(stream: &mut TcpStream) -> (String, Duration) {
    let start = Instant::now();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    (
        String::from_utf8_lossy(&answer).into_owned(),
        start.elapsed(),
    )
}

/// Reads one HTTP answer (head and a `Content-Length` body); returns it and how long it
/// took (everything read until then when the connection ends first).
fn http_answer(stream: &mut TcpStream) -> (String, Duration) {
    let start = Instant::now();
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => answer.push(byte[0]),
            _ => {
                return (
                    String::from_utf8_lossy(&answer).into_owned(),
                    start.elapsed(),
                );
            }
        }
    }
    let head = String::from_utf8_lossy(&answer).to_lowercase();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    let _ = stream.read_exact(&mut body);
    answer.extend(body);
    (
        String::from_utf8_lossy(&answer).into_owned(),
        start.elapsed(),
    )
}

/// The JSON body of a raw HTTP answer.
fn http_body(answer: &str) -> Value {
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {answer}"))
}

/// The daemon's resident memory in KiB.
fn rss_kib(daemon: &Daemon) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", daemon.pid().unwrap())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

fn assert_health_answers(daemon: &Daemon) {
    let health = daemon.nu().json("orch health");
    assert_eq!(health["pid"], daemon.pid().unwrap(), "{health}");
}

#[test]
fn slow_and_silent_clients_are_cut_after_their_timeouts() {
    let port = orch_e2e::free_port();
    let daemon = Daemon::start(&[
        "--port",
        &port.to_string(),
        "--handshake-timeout",
        "1s",
        "--read-timeout",
        "2s",
        "--idle-timeout",
        "3s",
    ]);
    let bound = Duration::from_secs(12);

    // No handshake at all: an error naming the flag, then the connection closes.
    let mut silent = raw_socket(&daemon);
    let (frames, took) = frames_until_closed(&mut silent);
    assert!(took < bound, "open for {took:?}");
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0]["kind"], "bad_request", "{frames:?}");
    assert!(
        frames[0]["message"]
            .as_str()
            .unwrap()
            .contains("--handshake-timeout")
    );

    // A request that starts and stalls (one byte of its header, then nothing).
    let mut stalled = raw_socket(&daemon);
    handshake(&mut stalled);
    stalled.write_all(&[0]).unwrap();
    let (frames, took) = frames_until_closed(&mut stalled);
    assert!(took < bound, "open for {took:?}");
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert!(
        frames[0]["message"]
            .as_str()
            .unwrap()
            .contains("--read-timeout"),
        "{frames:?}"
    );

    // A client trickling its handshake one byte at a time is cut too.
    let mut trickle = raw_socket(&daemon);
    let hello = frame(br#"{"protocol":3,"client":"slow"}"#);
    let start = Instant::now();
    let mut cut = false;
    for byte in &hello {
        if trickle.write_all(&[*byte]).is_err() {
            cut = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(400));
    }
    let (_, _) = frames_until_closed(&mut trickle);
    assert!(
        cut || start.elapsed() < bound,
        "a trickled handshake stayed open"
    );

    // After a request, a silent connection is closed at the idle timeout, without a word.
    let mut idle = raw_socket(&daemon);
    handshake(&mut idle);
    idle.write_all(&frame(br#"{"request":"health"}"#)).unwrap();
    assert_eq!(read_frame(&mut idle).unwrap()["response"], "health");
    let (frames, took) = frames_until_closed(&mut idle);
    assert!(frames.is_empty(), "{frames:?}");
    assert!(
        took >= Duration::from_secs(2) && took < bound,
        "closed after {took:?}"
    );

    // HTTP headers at one byte per 300 ms (slowloris): closed at the read timeout.
    let mut slow = TcpStream::connect(("127.0.0.1", port)).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let request = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let start = Instant::now();
    for byte in request {
        if slow.write_all(&[*byte]).is_err() || start.elapsed() > bound {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let (answer, _) = http_answer_until_closed(&mut slow);
    assert!(
        start.elapsed() < bound + Duration::from_secs(2),
        "a slowloris client stayed {:?}",
        start.elapsed()
    );
    assert!(
        !answer.starts_with("HTTP/1.1 200"),
        "the slow request was served: {answer}"
    );

    // An HTTP body that never completes: 408 with the JSON error, naming the flag.
    let mut stalled_body = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stalled_body
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let token = orch_e2e::http::token(&daemon, "operator");
    write!(
        stalled_body,
        "POST /workflows/servers/create HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"infra\":"
    )
    .unwrap();
    let (answer, took) = http_answer(&mut stalled_body);
    assert!(took < bound, "open for {took:?}");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let body = http_body(&answer);
    assert_eq!(body["error"]["kind"], "bad_request", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--read-timeout")
    );

    assert_health_answers(&daemon);
}

#[test]
fn clients_past_the_connection_caps_are_refused_with_a_clear_error() {
    let port = orch_e2e::free_port();
    let daemon = Daemon::start(&[
        "--port",
        &port.to_string(),
        "--max-socket-connections",
        "4",
        "--max-http-connections",
        "4",
    ]);
    // Every socket slot taken by a client that handshakes and then waits.
    let held: Vec<_> = (0..4)
        .map(|_| {
            let mut stream = raw_socket(&daemon);
            handshake(&mut stream);
            stream
        })
        .collect();
    let refused = orch_protocol::Client::connect(&daemon.socket(), "e2e").unwrap_err();
    match &refused {
        ClientError::Daemon(reply) => {
            assert_eq!(reply.kind, ErrorKind::Unavailable, "{reply:?}");
            assert!(
                reply.message.contains("--max-socket-connections"),
                "{reply:?}"
            );
            assert!(reply.message.contains("limit of 4"), "{reply:?}");
        }
        other => panic!("expected the cap's refusal, got {other}"),
    }
    // The plugin shows it as an error naming the cap.
    let err = daemon.nu().try_run("orch health").unwrap_err();
    assert!(err.contains("--max-socket-connections"), "{err}");
    // A slot freed is a slot usable again.
    drop(held);
    orch_e2e::eventually(Duration::from_secs(10), "a free socket slot", || {
        orch_protocol::Client::connect(&daemon.socket(), "e2e").ok()
    });

    // HTTP: four open connections, the fifth gets a 503 with the JSON error.
    let open: Vec<_> = (0..4)
        .map(|_| {
            let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(20)))
                .unwrap();
            stream
                .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            let mut answer = [0u8; 12];
            stream.read_exact(&mut answer).unwrap();
            assert_eq!(&answer, b"HTTP/1.1 200");
            stream
        })
        .collect();
    let mut fifth = TcpStream::connect(("127.0.0.1", port)).unwrap();
    fifth
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    fifth
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let (answer, _) = http_answer(&mut fifth);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    let body = http_body(&answer);
    assert_eq!(body["error"]["kind"], "unavailable", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-http-connections"),
        "{body}"
    );
    drop(open);
    orch_e2e::eventually(Duration::from_secs(10), "a free HTTP slot", || {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
        stream
            .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .ok()?;
        let (answer, _) = http_answer(&mut stream);
        answer.starts_with("HTTP/1.1 200").then_some(())
    });
    assert_health_answers(&daemon);
}

#[test]
fn waits_and_watch_streams_quiet_longer_than_the_idle_timeout_stay_open() {
    let port = orch_e2e::free_port();
    let daemon = Daemon::start(&[
        "--idle-timeout",
        "1s",
        "--read-timeout",
        "1s",
        "--port",
        &port.to_string(),
    ]);
    let nu = daemon.nu();
    // An HTTP event stream quiet for longer than both timeouts still delivers what comes.
    let events = std::process::Command::new("curl")
        .args(["-sS", "-N", "--max-time", "5", "-H"])
        .arg(format!(
            "Authorization: Bearer {}",
            orch_e2e::http::token(&daemon, "viewer")
        ))
        .arg(format!("http://127.0.0.1:{port}/events"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("curl runs");
    std::thread::sleep(Duration::from_millis(2500));
    let late = daemon
        .client()
        .call(&Request::Submit {
            tasks: vec![TaskSpec::command("true", vec!["late-event".into()])],
        })
        .unwrap();
    let out = events.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(28),
        "the stream stays open until curl leaves"
    );
    let Response::Tasks { tasks, .. } = late else {
        panic!("{late:?}")
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("\"task\":{}", tasks[0].id)),
        "no event of task {} after 2.5 s of quiet: {text}",
        tasks[0].id
    );
    // A watch on a task that is silent for 3 s ends with the task's final state.
    let events =
        nu.json("let task = (orch submit sleep 3); orch watch --task $task.id | get event");
    let kinds: Vec<_> = events
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(kinds.last(), Some(&"succeeded"), "{kinds:?}");
    // A wait on the socket for longer than the idle timeout gets its answer.
    let mut client = daemon.client();
    let submitted = client
        .call(&Request::Submit {
            tasks: vec![TaskSpec::command("sleep", vec!["2".into()])],
        })
        .unwrap();
    let Response::Tasks { tasks, .. } = submitted else {
        panic!("{submitted:?}")
    };
    match client
        .call(&Request::Wait {
            ids: vec![tasks[0].id],
        })
        .unwrap()
    {
        Response::Tasks { tasks, .. } => {
            assert_eq!(
                tasks[0].state.status(),
                orch_protocol::TaskStatus::Succeeded
            )
        }
        other => panic!("{other:?}"),
    }
    // The plugin's cached connection closed as idle is replaced without an error.
    let out = nu.run("orch health | ignore; sleep 2sec; orch health | get pid");
    assert_eq!(out.trim(), daemon.pid().unwrap().to_string());
}

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
