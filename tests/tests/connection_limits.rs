//! Connections cannot exhaust the daemon: slow and silent clients are cut after their
//! timeouts, clients past the connection caps get a clear refusal, and quiet waits and
//! watches stay open. Real daemon, real sockets, real HTTP, real `nu` with the plugin.
//! (What frames can do is in frame_limits.rs.)

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use orch_e2e::Daemon;
use orch_e2e::raw::{
    assert_health_answers, frame, frames_until_closed, handshake, raw_socket, read_frame,
};
use orch_protocol::{ClientError, ErrorKind, Request, Response, TaskSpec};
use serde_json::Value;

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
            stashed: false,
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
            stashed: false,
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
