//! The daemon's socket as another local user: a raw protocol client (Python, standard
//! library) run under `setpriv` as another uid, for the peer-uid and role checks.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

/// Reads one JSON line per message from stdin, sends it as a frame and prints, as one JSON
/// line, the frames that answer it: one, or a stream (`event`, `log` items until the
/// next other frame) or a list in parts (`more: true`). Stops when the daemon hangs up.
const CLIENT: &str = r#"
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
def read(n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data
def frame():
    head = read(4)
    body = head and read(struct.unpack(">I", head)[0])
    return None if body is None else json.loads(body)
for line in sys.stdin:
    body = json.dumps(json.loads(line)).encode()
    try:
        s.sendall(struct.pack(">I", len(body)) + body)
    except BrokenPipeError:
        pass  # refused before it was read; the answer may still be there
    answers = []
    while True:
        answer = frame()
        if answer is None:
            break
        answers.append(answer)
        if answer.get("response") not in ("event", "log") and not answer.get("more"):
            break
    print(json.dumps(answers), flush=True)
    if answer is None:
        break
"#;

/// The hello a client sends first, with this protocol version.
pub fn hello(client: &str) -> Value {
    serde_json::json!({"protocol": orch_protocol::PROTOCOL_VERSION, "client": client})
}

/// Whether the tests run as root (switching to another uid needs it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Sends `messages` (the hello first) to the daemon's socket as `uid` (and its gid), in
/// order; the frames answering each one, as many lists as messages were answered.
/// Panics when the client cannot run (needs root, `setpriv` and `/usr/bin/python3`).
pub fn socket_as(uid: u32, socket: &Path, messages: &[Value]) -> Vec<Vec<Value>> {
    let mut child = Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .args(["--clear-groups", "/usr/bin/python3", "-c", CLIENT])
        .arg(socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("setpriv runs");
    let input: String = messages.iter().map(|m| format!("{m}\n")).collect();
    // The client may exit early (hung up on): a broken pipe here is an answer too.
    let _ = child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(input.as_bytes());
    let out = child.wait_with_output().expect("the client ends");
    assert!(
        out.status.success(),
        "the client as uid {uid} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}
