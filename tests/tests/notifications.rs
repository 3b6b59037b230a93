//! Notifications through the real plugin and daemon: a webhook to a real local HTTP
//! receiver that checks each signature, filters, a test notification, a command hook,
//! and a kill -9 between an event and its delivery (delivered after the restart, under
//! the same idempotency key).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use orch_e2e::{Daemon, eventually, free_port};
use serde_json::Value;

const SECRET: &str = "s3cret";

/// A notification the receiver accepted: its key, its event type and its body.
#[derive(Debug, Clone)]
struct Received {
    key: String,
    event: String,
    body: Value,
}

/// An HTTP receiver on `port` that checks each request's signature (a bad one is
/// answered 401 and not kept) and keeps the good ones.
struct Receiver {
    received: Arc<Mutex<Vec<Received>>>,
    bad: Arc<Mutex<u32>>,
}

impl Receiver {
    fn start(port: u16) -> Receiver {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("the receiver's port");
        let received = Arc::new(Mutex::new(Vec::new()));
        let bad = Arc::new(Mutex::new(0));
        let (kept, rejected) = (received.clone(), bad.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (kept, rejected) = (kept.clone(), rejected.clone());
                std::thread::spawn(move || serve(stream, &kept, &rejected));
            }
        });
        Receiver { received, bad }
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

/// Reads one request, checks it, answers.
fn serve(stream: TcpStream, kept: &Mutex<Vec<Received>>, rejected: &Mutex<u32>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut headers = std::collections::HashMap::new();
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        let Some((name, value)) = line.trim_end().split_once(": ") else {
            break;
        };
        headers.insert(name.to_ascii_lowercase(), value.to_string());
    }
    let length: usize = headers["content-length"].parse().unwrap();
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let timestamp: i64 = headers["x-orch-timestamp"].parse().unwrap();
    let fresh = (chrono_now() - timestamp).abs() < 300;
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{timestamp}.").as_bytes());
    mac.update(&body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let signed = fresh && headers.get("x-orch-signature") == Some(&format!("sha256={hex}"));
    let status = if signed {
        kept.lock().unwrap().push(Received {
            key: headers["x-orch-delivery"].clone(),
            event: headers["x-orch-event"].clone(),
            body: serde_json::from_slice(&body).unwrap(),
        });
        "200 OK"
    } else {
        *rejected.lock().unwrap() += 1;
        "401 Unauthorized"
    };
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
}

/// The Unix time in seconds.
fn chrono_now() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.unwrap().as_secs() as i64
}

#[test]
fn webhooks_are_signed_and_filtered_and_a_command_hook_gets_the_json() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let port = free_port();
    let receiver = Receiver::start(port);
    nu.run(&format!(
        "orch notify add ci --url http://127.0.0.1:{port}/hook --secret {SECRET} --label db | ignore"
    ));
    let file = daemon.dir().join("events.jsonl");
    nu.run(&format!(
        "orch notify add log --command [sh -c 'cat >> {}; echo >> {}'] --events [started] | ignore",
        file.display(),
        file.display()
    ));
    let db = nu.json("orch submit --label db --wait true | get id");
    nu.run("orch submit --wait false | ignore");
    nu.run("orch submit --wait true | ignore");
    eventually(
        Duration::from_secs(15),
        "the db task's success and a failure... of db only",
        || (!receiver.received().is_empty()).then_some(()),
    );
    std::thread::sleep(Duration::from_millis(500));
    let received = receiver.received();
    assert_eq!(received.len(), 1, "only the db task's end: {received:?}");
    assert_eq!(received[0].event, "succeeded");
    assert_eq!(received[0].body["task"], db);
    assert_eq!(received[0].body["label"], "db");
    assert_eq!(received[0].body["delivery"], received[0].key.as_str());
    nu.run("orch notify test ci | ignore");
    eventually(Duration::from_secs(10), "the test notification", || {
        receiver
            .received()
            .iter()
            .any(|r| r.event == "test")
            .then_some(())
    });
    eventually(Duration::from_secs(10), "three starts in the file", || {
        let text = std::fs::read_to_string(&file).ok()?;
        (text.lines().filter(|l| !l.is_empty()).count() == 3).then_some(text)
    });
    let ci = nu.json("orch notify list | where name == ci | first");
    assert_eq!(
        (ci["delivered"].as_u64(), ci["waiting"].as_u64()),
        (Some(2), Some(0))
    );
    assert_eq!(*receiver.bad.lock().unwrap(), 0);
    let refused = [
        (
            "orch notify add x --url https://example.com/h --secret s",
            "HTTPS",
        ),
        ("orch notify add x --url http://h/", "--secret"),
        (
            "orch notify add x --command [true] --events [exploded]",
            "not an event type",
        ),
        ("orch notify add ci --command [true]", "exists already"),
        ("orch notify add x", "no target"),
        (
            "orch notify add x --command [true] --workflow (-1)",
            "a workflow id",
        ),
        ("orch notify test nope", "does not exist"),
    ];
    for (script, expected) in refused {
        let error = nu.try_run(script).unwrap_err();
        assert!(error.contains(expected), "{script}: {error}");
    }
    nu.run("orch notify remove log | ignore");
    assert_eq!(
        nu.json("orch notify list | get name"),
        serde_json::json!(["ci"])
    );
}

#[test]
fn a_notification_waiting_at_a_kill_9_is_delivered_after_the_restart_once() {
    let mut daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let port = free_port();
    // Nothing listens yet: each try is refused and retried.
    nu.run(&format!(
        "orch notify add ci --url http://127.0.0.1:{port}/hook --secret {SECRET} | ignore"
    ));
    let id = nu.json("orch submit --wait true | get id");
    let waiting = eventually(Duration::from_secs(15), "a failed try", || {
        let ci = nu.json("orch notify list | first");
        (ci["waiting"] == 1 && ci["last_error"].is_string()).then_some(ci)
    });
    assert!(
        waiting["last_error"]
            .as_str()
            .unwrap()
            .contains("cannot connect"),
        "{waiting}"
    );
    let seq = nu.json(&format!(
        "orch watch --task {id} | where event == succeeded | first | get seq"
    ));
    daemon.kill9();
    let receiver = Receiver::start(port);
    daemon.restart();
    eventually(
        Duration::from_secs(20),
        "delivered after the restart",
        || (!receiver.received().is_empty()).then_some(()),
    );
    std::thread::sleep(Duration::from_millis(500));
    let received = receiver.received();
    assert_eq!(received.len(), 1, "{received:?}");
    assert_eq!(received[0].key, format!("{:020}.ci", seq.as_u64().unwrap()));
    let ci = nu.json("orch notify list | first");
    assert_eq!(
        (ci["delivered"].as_u64(), ci["waiting"].as_u64()),
        (Some(1), Some(0))
    );
}
