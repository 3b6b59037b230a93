//! Start-up refuses what is wrong before anything starts: a damaged or missing store, a
//! bad combination of settings, something other than a socket at the socket path; the
//! data directory stays private; `orch daemon stop` returns once the daemon has exited.
//! (Over 400 lines: the start-up checks share the spawn-and-refuse helpers at the top.)

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use orch_e2e::{Daemon, Nu, Sweeper, binary, eventually};
use orch_protocol::{Client, Request, Response, Task, TaskSpec, TaskStatus};

/// Every file under `dir` with its content (directories as `None`; sockets, which only
/// a running process has, are left out).
fn tree(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    use std::os::unix::fs::FileTypeExt as _;
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let entry = entry.unwrap();
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_socket()) {
            continue;
        }
        if path.is_dir() {
            out.extend(tree(&path));
            out.insert(path, None);
        } else {
            out.insert(path.clone(), Some(std::fs::read(&path).unwrap()));
        }
    }
    out
}

/// Copies the files of `from` into a new `to` (one level of subdirectories, as a data
/// directory has).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for (path, content) in tree(from) {
        let target = to.join(path.strip_prefix(from).unwrap());
        match content {
            None => std::fs::create_dir_all(&target).unwrap(),
            Some(bytes) => {
                std::fs::create_dir_all(target.parent().unwrap()).unwrap();
                std::fs::write(&target, bytes).unwrap();
            }
        }
    }
}

/// The daemon binary on `data_dir` and `socket` with `args`; stderr captured.
fn spawn_daemon(data_dir: &Path, socket: &Path, args: &[&str]) -> Child {
    Command::new(binary("provisioning-orchestrator"))
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--socket")
        .arg(socket)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the daemon starts")
}

/// How a start ended: refused (exit status and stderr), or running (then it was killed).
enum Start {
    Refused(std::process::ExitStatus, String),
    Started,
}

/// Starts the daemon and waits until it either answers on its socket (then kills it) or
/// exits.
fn try_start(data_dir: &Path, socket: &Path, args: &[&str]) -> Start {
    let mut child = spawn_daemon(data_dir, socket, args);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
            return Start::Refused(status, stderr);
        }
        if Client::connect(socket, "e2e").is_ok() {
            let _ = child.kill();
            let _ = child.wait();
            return Start::Started;
        }
        assert!(
            Instant::now() < deadline,
            "the daemon neither started nor exited"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts the daemon, expecting a refusal; returns its stderr.
fn refused(data_dir: &Path, socket: &Path, args: &[&str]) -> String {
    match try_start(data_dir, socket, args) {
        Start::Refused(status, stderr) => {
            assert!(!status.success(), "exit status {status}: {stderr}");
            assert_eq!(status.code(), Some(1), "{stderr}");
            assert!(!stderr.contains("panicked"), "{stderr}");
            stderr
        }
        Start::Started => panic!("the daemon started"),
    }
}

/// A data directory with a real store holding a few finished tasks and their logs.
fn stopped_daemon_with_tasks() -> Daemon {
    let mut daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    nu.run("1..3 | each {|i| orch submit echo $'hello ($i)' } | orch wait | ignore");
    assert!(daemon.terminate().success());
    daemon
}

#[test]
fn an_empty_store_file_is_refused_and_nothing_is_written() {
    let daemon = stopped_daemon_with_tasks();
    let data = daemon.data_dir();
    let store = data.join("orchestrator.redb");
    std::fs::write(&store, b"").unwrap();
    let before = tree(&data);
    let stderr = refused(&data, &daemon.socket(), &[]);
    assert!(
        stderr.contains(&format!("{} cannot be used", store.display()))
            && stderr.contains("empty (0 bytes)")
            && stderr.contains("restore")
            && stderr.contains("backup"),
        "{stderr}"
    );
    assert_eq!(tree(&data), before, "the data directory was changed");
}

#[test]
fn a_missing_store_beside_earlier_task_logs_is_not_replaced_by_a_new_one() {
    let daemon = stopped_daemon_with_tasks();
    let data = daemon.data_dir();
    std::fs::rename(
        data.join("orchestrator.redb"),
        daemon.dir().join("moved.redb"),
    )
    .unwrap();
    let before = tree(&data);
    let stderr = refused(&data, &daemon.socket(), &[]);
    assert!(
        stderr.contains("orchestrator.redb is missing")
            && stderr.contains("holds task logs of an earlier store"),
        "{stderr}"
    );
    assert_eq!(tree(&data), before, "the data directory was changed");
    assert!(!data.join("orchestrator.redb").exists());
}

#[test]
fn random_bytes_in_the_store_are_refused_without_a_panic() {
    let daemon = stopped_daemon_with_tasks();
    let good = daemon.data_dir();
    let bytes = std::fs::read(good.join("orchestrator.redb")).unwrap();
    let mut noise = [0u8; 64];
    std::io::Read::read_exact(
        &mut std::fs::File::open("/dev/urandom").unwrap(),
        &mut noise,
    )
    .unwrap();
    // Every 4 KiB page of the file in turn, plus the header's magic number: a damaged page
    // that the store uses is refused with the message; no damage makes it panic.
    let offsets = std::iter::once(0).chain((0..bytes.len()).step_by(4096).map(|o| o + 100));
    let mut refusals = 0;
    for (case, offset) in offsets.enumerate() {
        let data = daemon.dir().join(format!("case-{case}"));
        copy_tree(&good, &data);
        let mut damaged = bytes.clone();
        let end = (offset + noise.len()).min(damaged.len());
        damaged[offset..end].copy_from_slice(&noise[..end - offset]);
        let store = data.join("orchestrator.redb");
        std::fs::write(&store, &damaged).unwrap();
        let before = tree(&data);
        let socket = daemon.dir().join(format!("case-{case}.sock"));
        match try_start(&data, &socket, &[]) {
            Start::Refused(status, stderr) => {
                assert_eq!(status.code(), Some(1), "offset {offset}: {stderr}");
                assert!(!stderr.contains("panicked"), "offset {offset}: {stderr}");
                assert!(
                    stderr.contains(&format!("{} cannot be used", store.display()))
                        && stderr.contains("backup"),
                    "offset {offset}: {stderr}"
                );
                assert_eq!(tree(&data), before, "offset {offset}: the data dir changed");
                refusals += 1;
            }
            // Bytes in a page the store does not use harm nothing.
            Start::Started => assert!(offset != 0, "a store without its magic number opened"),
        }
    }
    assert!(
        refusals >= 3,
        "only {refusals} damaged pages were noticed in a {} byte store",
        bytes.len()
    );
}

fn submit(client: &mut Client, spec: TaskSpec) {
    match client
        .call(&Request::Submit {
            tasks: vec![spec],
            stashed: false,
        })
        .unwrap()
    {
        Response::Tasks { .. } => {}
        other => panic!("{other:?}"),
    }
}

fn task(client: &mut Client, id: u64) -> Task {
    match client.call(&Request::Get { id }).unwrap() {
        Response::Task { task } => *task,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_bad_setting_is_refused_before_any_task_runs() {
    let mut daemon = Daemon::start(&["--parallel", "1"]);
    let marker = daemon.dir().join("ran");
    {
        let mut client = daemon.client();
        submit(&mut client, TaskSpec::command("sleep", vec!["60".into()]));
        let touch = TaskSpec::command("touch", vec![marker.display().to_string()]);
        submit(&mut client, touch);
        assert_eq!(task(&mut client, 2).state.status(), TaskStatus::Queued);
    }
    assert!(daemon.terminate().success());
    let data = daemon.data_dir();
    let tokens = data.join("tokens.json");
    let port = orch_e2e::free_port().to_string();
    let open_on_all = ["--port", &port, "--bind", "0.0.0.0", "--http-auth", "none"];
    let stderr = refused(&data, &daemon.socket(), &open_on_all);
    assert!(
        stderr.contains("--http-auth none is only allowed on a loopback address, not 0.0.0.0"),
        "{stderr}"
    );
    // A port that cannot be bound is refused before the engine starts too.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port().to_string();
    let stderr = refused(&data, &daemon.socket(), &["--port", &taken_port]);
    assert!(stderr.contains("cannot listen on 127.0.0.1:"), "{stderr}");
    let stderr = refused(&data, &daemon.socket(), &["--workspace", "/no/such/dir"]);
    assert!(
        stderr.contains("--workspace /no/such/dir: not an existing directory"),
        "{stderr}"
    );
    std::thread::sleep(Duration::from_secs(2));
    assert!(!marker.exists(), "a queued task ran at a refused start");
    assert!(
        !tokens.exists(),
        "tokens.json was created at a refused start"
    );
    assert!(
        !daemon.socket().exists(),
        "a refused start left its socket behind"
    );
    // Task 1 takes the only slot again; task 2 is still queued and was never attempted.
    daemon.restart();
    let mut client = daemon.client();
    let second = task(&mut client, 2);
    assert_eq!(second.state.status(), TaskStatus::Queued);
    assert!(second.attempts.is_empty(), "{:?}", second.attempts);
    assert!(!marker.exists());
}

#[test]
fn only_a_socket_is_ever_removed_at_the_socket_path() {
    let dir = tempfile::tempdir().unwrap();
    let _sweeper = Sweeper(dir.path());
    let target = dir.path().join("precious.txt");
    std::fs::write(&target, "keep me").unwrap();
    let file = dir.path().join("file.sock");
    std::fs::write(&file, "not a socket").unwrap();
    let directory = dir.path().join("dir.sock");
    std::fs::create_dir(&directory).unwrap();
    std::fs::write(directory.join("inside"), "x").unwrap();
    let link = dir.path().join("link.sock");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let before = tree(dir.path());
    for (path, kind) in [
        (&file, "a regular file"),
        (&directory, "a directory"),
        (&link, "a symbolic link"),
    ] {
        let data = dir.path().join("data");
        let stderr = refused(&data, path, &[]);
        assert!(
            stderr.contains(&format!(
                "{} exists and is {kind}, not a socket; it is left as it is",
                path.display()
            )),
            "{stderr}"
        );
        assert!(
            !data.exists(),
            "the data directory was created at a refused start"
        );
    }
    assert_eq!(
        tree(dir.path()),
        before,
        "something at a socket path was changed"
    );
    assert_eq!(std::fs::read_link(&link).unwrap(), target);
}

/// True while `pid` runs (a zombie has exited: it only waits to be collected).
fn process_runs(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rfind(')')
            .is_some_and(|end| stat[end + 1..].trim_start().starts_with('Z'))
    })
}

#[test]
fn orch_daemon_stop_returns_once_the_daemon_has_exited() {
    let mut daemon = Daemon::start(&[]);
    let pid = u64::from(daemon.pid().unwrap());
    let nu = daemon.nu();
    // A running task: the daemon stops it before it exits.
    nu.run("orch submit sleep 60 | ignore");
    eventually(Duration::from_secs(20), "the task to run", || {
        (nu.json("orch task 1 | get status") == "running").then_some(())
    });
    let stopped = nu.json("orch daemon stop");
    assert_eq!(stopped["stopped"], true);
    assert_eq!(stopped["pid"], pid);
    assert!(
        !process_runs(pid),
        "orch daemon stop returned while pid {pid} ran"
    );
    assert!(!daemon.socket().exists(), "the socket file is still there");
    daemon.kill9();
}

#[test]
fn orch_daemon_stop_waits_for_a_daemon_in_another_pid_namespace() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: a pid namespace needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let _sweeper = Sweeper(dir.path());
    let socket = dir.path().join("d.sock");
    let data = dir.path().join("data");
    // The daemon is pid 1 of its own namespace (as in a container sharing its socket):
    // the pid it reports means another process here.
    let mut child = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(binary("provisioning-orchestrator"))
        .arg("--quiet")
        .arg("--data-dir")
        .arg(&data)
        .arg("--socket")
        .arg(&socket)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    eventually(Duration::from_secs(20), "the daemon to answer", || {
        Client::connect(&socket, "e2e").ok()
    });
    let nu = Nu::new(dir.path(), &socket);
    nu.run("orch submit sleep 60 | ignore");
    eventually(Duration::from_secs(20), "the task to run", || {
        (nu.json("orch task 1 | get status") == "running").then_some(())
    });
    let stopped = nu.json("orch daemon stop");
    assert_eq!(stopped["stopped"], true);
    // It has exited: its database is free for the next daemon, its socket is gone.
    assert!(!socket.exists(), "the socket file is still there");
    let reopened = redb::Database::open(data.join("orchestrator.redb"));
    assert!(
        reopened.is_ok(),
        "the store is still held: {:?}",
        reopened.err()
    );
    let _ = child.wait();
}

/// Every path under `dir` (itself included) whose mode is not 0700 (directories) or 0600
/// (files).
fn not_private(dir: &Path) -> Vec<String> {
    let mut paths: Vec<PathBuf> = tree(dir).into_keys().collect();
    paths.push(dir.to_path_buf());
    paths
        .into_iter()
        .filter_map(|path| {
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o777;
            let want = if meta.is_dir() { 0o700 } else { 0o600 };
            (mode != want).then(|| format!("{} is {mode:o}", path.display()))
        })
        .collect()
}

#[test]
fn the_data_directory_and_every_file_in_it_are_private() {
    let dir = tempfile::tempdir().unwrap();
    let _sweeper = Sweeper(dir.path());
    let socket = dir.path().join("d.sock");
    let data = dir.path().join("data");
    let nu = Nu::new(dir.path(), &socket);
    nu.run(&format!(
        "orch daemon start --data-dir '{}' --binary '{}' | ignore; \
         orch submit [sh -c 'echo out; echo err >&2'] | orch wait | ignore; \
         orch daemon stop | ignore",
        data.display(),
        binary("provisioning-orchestrator").display()
    ));
    assert!(data.join("logs/1.log").exists());
    assert_eq!(not_private(&data), Vec::<String>::new());
    // What an earlier version left readable is tightened at the next start.
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let store = data.join("orchestrator.redb");
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o644)).unwrap();
    let port = orch_e2e::free_port().to_string();
    let mut child = spawn_daemon(&data, &socket, &["--quiet", "--port", &port]);
    eventually(Duration::from_secs(20), "the daemon to answer", || {
        Client::connect(&socket, "e2e").ok()
    });
    nu.run("orch submit echo again | orch wait | ignore; orch daemon stop | ignore");
    let _ = child.wait();
    assert!(data.join("tokens.json").exists() && data.join("logs/2.log").exists());
    assert_eq!(not_private(&data), Vec::<String>::new());
}
