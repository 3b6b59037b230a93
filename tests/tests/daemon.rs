//! The daemon process: start and stop from `nu`, socket rules, and the wire protocol's
//! handling of bad input.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::Duration;

use orch_e2e::{Daemon, Nu, Sweeper, binary, peer};
use orch_protocol::frame::{FrameReader, encode};
use orch_protocol::{Hello, PROTOCOL_VERSION, Request, Response};

fn raw_connection(daemon: &Daemon) -> (UnixStream, FrameReader) {
    let mut stream = UnixStream::connect(daemon.socket()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let hello = Hello {
        protocol: PROTOCOL_VERSION,
        client: "raw".into(),
    };
    stream.write_all(&encode(&hello).unwrap()).unwrap();
    let mut reader = FrameReader::new();
    let _: serde_json::Value = reader.read(&mut stream, &|| false).unwrap();
    (stream, reader)
}

fn send_raw(stream: &mut UnixStream, body: &[u8]) {
    stream
        .write_all(&(body.len() as u32).to_be_bytes())
        .unwrap();
    stream.write_all(body).unwrap();
}

fn read_response(stream: &mut UnixStream, reader: &mut FrameReader) -> Response {
    reader.read(stream, &|| false).unwrap()
}

fn error_message(response: Response) -> String {
    match response {
        Response::Error(reply) => reply.message,
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn malformed_frames_get_errors_and_the_connection_survives() {
    let daemon = Daemon::start(&[]);
    let (mut stream, mut reader) = raw_connection(&daemon);
    send_raw(&mut stream, b"{not json");
    assert!(error_message(read_response(&mut stream, &mut reader)).contains("invalid request"));
    send_raw(&mut stream, br#"{"request":"get","id":1,"colour":"red"}"#);
    assert!(
        error_message(read_response(&mut stream, &mut reader)).contains("unknown field `colour`")
    );
    send_raw(
        &mut stream,
        br#"{"request":"submit","tasks":[{"kind":{"type":"command","program":"true"},"priorty":3}]}"#,
    );
    assert!(
        error_message(read_response(&mut stream, &mut reader)).contains("unknown field `priorty`")
    );
    send_raw(&mut stream, br#"{"request":"submit","tasks":[]}"#);
    assert!(error_message(read_response(&mut stream, &mut reader)).contains("no tasks"));
    // Still usable after all of that.
    stream
        .write_all(&encode(&Request::Health).unwrap())
        .unwrap();
    assert!(matches!(
        read_response(&mut stream, &mut reader),
        Response::Health(_)
    ));
    // Nothing was submitted by the bad requests.
    let mut client = daemon.client();
    match client
        .call(&Request::List {
            filter: Default::default(),
        })
        .unwrap()
    {
        Response::Tasks { tasks, more } => assert!(tasks.is_empty() && !more),
        other => panic!("{other:?}"),
    }
}

#[test]
fn oversized_and_truncated_frames_do_not_hurt_the_daemon() {
    let daemon = Daemon::start(&[]);
    let (mut stream, mut reader) = raw_connection(&daemon);
    stream
        .write_all(&(64u32 * 1024 * 1024).to_be_bytes())
        .unwrap();
    let message = error_message(read_response(&mut stream, &mut reader));
    assert!(message.contains("frame refused"), "{message}");
    // The daemon closes that connection.
    let mut rest = Vec::new();
    assert_eq!(stream.read_to_end(&mut rest).unwrap_or(0), 0);

    let (mut stream, _) = raw_connection(&daemon);
    stream.write_all(&100u32.to_be_bytes()).unwrap();
    stream.write_all(b"{\"request\":").unwrap();
    drop(stream);
    let mut client = daemon.client();
    assert!(matches!(
        client.call(&Request::Health).unwrap(),
        Response::Health(_)
    ));
}

#[test]
fn a_client_with_another_protocol_version_is_refused_by_name() {
    let daemon = Daemon::start(&[]);
    let mut stream = UnixStream::connect(daemon.socket()).unwrap();
    let hello = Hello {
        protocol: PROTOCOL_VERSION + 1,
        client: "future-client".into(),
    };
    stream.write_all(&encode(&hello).unwrap()).unwrap();
    let mut reader = FrameReader::new();
    let message = error_message(reader.read(&mut stream, &|| false).unwrap());
    assert!(
        message.contains(&format!("speaks protocol {}", PROTOCOL_VERSION + 1))
            && message.contains(&format!("speaks protocol {PROTOCOL_VERSION}")),
        "{message}"
    );
}

#[test]
fn the_socket_is_owner_only_and_a_second_daemon_is_refused() {
    let daemon = Daemon::start(&[]);
    let mode = std::fs::metadata(daemon.socket())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let run_second = |data_dir: std::path::PathBuf, socket: std::path::PathBuf| {
        let out = Command::new(binary("provisioning-orchestrator"))
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--socket")
            .arg(socket)
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let same_socket = run_second(daemon.dir().join("other"), daemon.socket());
    assert!(same_socket.contains("already running on"), "{same_socket}");
    let same_data = run_second(daemon.data_dir(), daemon.dir().join("other.sock"));
    assert!(
        same_data.contains("already open in another process"),
        "{same_data}"
    );
}

#[test]
fn a_stale_socket_from_a_dead_daemon_is_replaced() {
    let mut daemon = Daemon::start(&[]);
    daemon.kill9();
    assert!(
        daemon.socket().exists(),
        "kill -9 leaves the socket file behind"
    );
    daemon.restart();
    let mut client = daemon.client();
    assert!(matches!(
        client.call(&Request::Health).unwrap(),
        Response::Health(_)
    ));
}

#[test]
fn help_explains_every_flag() {
    let out = Command::new(binary("provisioning-orchestrator"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--data-dir",
        "--socket",
        "--storage-type",
        "--parallel",
        "--nu-binary",
    ] {
        assert!(help.contains(flag), "{flag} missing from --help:\n{help}");
    }
}

#[test]
fn orch_daemon_start_status_stop_from_nu() {
    let dir = tempfile::tempdir().unwrap();
    let _sweeper = Sweeper(dir.path());
    let socket = dir.path().join("d.sock");
    let nu = Nu::new(dir.path(), &socket);
    let err = nu.try_run("orch health").unwrap_err();
    assert!(
        err.contains("daemon is not running") && err.contains("orch daemon start"),
        "{err}"
    );
    assert_eq!(nu.json("orch daemon status | get running"), false);
    let start = format!(
        "orch daemon start --data-dir {} --binary {} | select running parallel_limit",
        dir.path().join("data").display(),
        binary("provisioning-orchestrator").display()
    );
    assert_eq!(
        nu.json(&start),
        serde_json::json!({"running": true, "parallel_limit": 8})
    );
    let pid = nu.json("orch daemon status | get pid");
    // Idempotent: a second start finds the running daemon.
    assert_eq!(nu.json(&format!("{start} | get running")), true);
    assert_eq!(nu.json("orch daemon status | get pid"), pid);
    assert_eq!(
        nu.json("orch submit echo hi | orch wait | get 0.status"),
        "succeeded"
    );
    assert_eq!(nu.json("orch daemon stop | get stopped"), true);
    assert_eq!(nu.json("orch daemon status | get running"), false);
    assert_eq!(nu.json("orch daemon stop | get stopped"), false);
    // The data survived the stop.
    let status = nu.json(&format!("{start} | ignore; orch task 1 | get status"));
    assert_eq!(status, "succeeded");
    // One nu session across a restart: the plugin's cached connection goes stale and a
    // submit (not safe to resend blindly) still works on a fresh one.
    let resubmitted = nu.json(&format!(
        "orch health | ignore; orch daemon stop | ignore; \
         job spawn {{ ^'{bin}' --data-dir '{data}' --socket '{sock}' }} | ignore; \
         while not ('{sock}' | path exists) {{ sleep 20ms }}; \
         orch submit echo again | orch wait | get 0.id",
        bin = binary("provisioning-orchestrator").display(),
        data = dir.path().join("data").display(),
        sock = socket.display(),
    ));
    assert_eq!(resubmitted, 2);
    nu.run("orch daemon stop | ignore");
}

#[test]
fn out_of_range_settings_are_refused_by_field() {
    let daemon = Daemon::start(&[]);
    let mut client = daemon.client();
    let mut spec = orch_protocol::TaskSpec::command("true", vec![]);
    spec.timeout_ms = Some(400 * 24 * 3600 * 1000);
    let err = client
        .call(&Request::Submit {
            tasks: vec![spec],
            stashed: false,
        })
        .unwrap_err();
    match err {
        orch_protocol::ClientError::Daemon(reply) => {
            assert_eq!(reply.field.as_deref(), Some("timeout"));
            assert!(
                reply.message.contains("must not exceed a year"),
                "{}",
                reply.message
            );
        }
        other => panic!("{other}"),
    }
    let nu = daemon.nu();
    let err = nu.try_run("orch submit --retries -1 true").unwrap_err();
    assert!(err.contains("retries must not be negative"), "{err}");
    let err = nu
        .try_run("orch submit --priority 1 --timeout 5sec")
        .unwrap_err();
    assert!(err.contains("nothing to run"), "{err}");
    assert_eq!(nu.json("orch tasks | length"), 0);
}

#[test]
fn another_user_is_refused_even_when_the_socket_is_opened_up() {
    if !peer::is_root() {
        eprintln!("skipped: switching to another uid needs root");
        return;
    }
    let daemon = Daemon::start(&[]);
    // Loosen the file permissions so only the daemon's peer-uid check stands in the way.
    std::fs::set_permissions(daemon.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(daemon.socket(), std::fs::Permissions::from_mode(0o666)).unwrap();
    let answers = peer::socket_as(
        65534,
        &daemon.socket(),
        &[serde_json::json!({"protocol": 1, "client": "intruder"})],
    );
    let message = answers[0][0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("permission denied: uid 65534 is not the daemon's owner"),
        "{answers:?}"
    );
}

#[test]
fn task_lists_larger_than_a_frame_arrive_in_parts() {
    let daemon = Daemon::start(&["--parallel", "1"]);
    let nu = daemon.nu();
    // 2 × 180 tasks with 50 kB of parameters each: every submission fits in a frame,
    // but the whole list (18 MB) does not.
    let count = nu.json(
        "let gate = (orch submit [sh -c 'sleep 60']); \
         let blob = ('' | fill -c x -w 50000); \
         let batch = (1..180 | each { {command: [true], after: [$gate.id], params: {blob: $blob}} }); \
         $batch | orch submit | length | ignore; \
         let second = ($batch | orch submit); \
         [($second | length), (orch tasks | length), (orch tasks --status blocked | get 0.id)]",
    );
    assert_eq!(count, serde_json::json!([180, 361, 361]));
    let err = nu.try_run("orch wait --timeout 300ms 361").unwrap_err();
    assert!(
        err.contains("the tasks were not all finished when the timeout passed"),
        "{err}"
    );
}

#[test]
fn a_user_granted_a_role_may_do_what_the_role_allows_and_no_more() {
    if !peer::is_root() {
        eprintln!("skipped: switching to another uid needs root");
        return;
    }
    let daemon = Daemon::start(&["--allow-user", "65534:viewer"]);
    std::fs::set_permissions(daemon.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mode = std::fs::metadata(daemon.socket())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o666, "a granted user must be able to connect");
    let answers = peer::socket_as(
        65534,
        &daemon.socket(),
        &[
            peer::hello("viewer"),
            serde_json::json!({"request": "health"}),
            serde_json::json!({"request": "submit", "tasks": [{"kind": {"type": "command", "program": "true"}}]}),
            serde_json::json!({"request": "audit_verify"}),
        ],
    );
    let seen: Vec<&serde_json::Value> = answers[1..]
        .iter()
        .map(|frames| {
            let answer = &frames[0];
            if answer["response"] == "health" {
                &answer["response"]
            } else {
                &answer["message"]
            }
        })
        .collect();
    assert_eq!(
        seen,
        [
            "health",
            "permission denied: uid 65534 has the role viewer; this request needs operator",
            "permission denied: uid 65534 has the role viewer; this request needs admin",
        ],
        "{answers:?}"
    );
    assert_eq!(
        daemon.nu().json("orch tasks | length"),
        0,
        "nothing was submitted"
    );
}
