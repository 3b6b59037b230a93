//! What a task can make the daemon hold or write is bounded: long output lines, reading
//! big logs, progress floods, large parameters, file descriptor exhaustion at start, and
//! logs that would fill the disk. Each test drives the real daemon and the real `nu`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use orch_e2e::{Daemon, eventually};
use orch_protocol::{Request, Response, TaskSpec};

/// A field of `/proc/PID/status` (`VmRSS`, `VmHWM`), in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the daemon runs");
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// The daemon's memory now and at its peak, in MiB, for the test's report.
fn memory_mib(daemon: &Daemon) -> (u64, u64) {
    let pid = daemon.pid().expect("the daemon runs");
    (
        status_kib(pid, "VmRSS") / 1024,
        status_kib(pid, "VmHWM") / 1024,
    )
}

/// Reads task `id`'s whole log over the socket and returns (bytes, bytes that are not `x`).
fn read_log(socket: &Path, id: u64) -> (usize, usize) {
    let mut client = orch_protocol::Client::connect(socket, "e2e").expect("the daemon answers");
    client
        .send(&Request::Logs { id, follow: false })
        .expect("the request is sent");
    let (mut bytes, mut other) = (0, 0);
    loop {
        match client.next(&|| false).expect("the stream goes on") {
            Response::Log { text } => {
                bytes += text.len();
                other += text.bytes().filter(|b| *b != b'x').count();
            }
            Response::StreamEnd => return (bytes, other),
            response => panic!("unexpected answer: {response:?}"),
        }
    }
}

/// 120 MB is more than the 100 MiB the daemon may grow by, so a line buffered whole (or a
/// log read whole, three times at once) fails this; it keeps the debug-build run short.
#[test]
fn a_120_mb_line_is_logged_in_pieces_and_read_back_in_chunks() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let (base, _) = memory_mib(&daemon);
    let task = nu.json(
        r#"orch submit [sh -c 'head -c 120000000 /dev/zero | tr "\000" x'] | orch wait | first | select status"#,
    );
    assert_eq!(task, serde_json::json!({"status": "succeeded"}));
    let (_, peak_running) = memory_mib(&daemon);
    eprintln!("120 MB line: RSS at start {base} MiB, peak while it ran {peak_running} MiB");
    assert!(
        peak_running < base + 100,
        "the daemon grew from {base} MiB to {peak_running} MiB"
    );
    let socket = daemon.socket();
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let socket = socket.clone();
            std::thread::spawn(move || read_log(&socket, 1))
        })
        .collect();
    for reader in readers {
        assert_eq!(reader.join().expect("a reader"), (120_000_000, 0));
    }
    let (_, peak_reading) = memory_mib(&daemon);
    eprintln!("3 concurrent reads of its log: peak {peak_reading} MiB");
    assert!(
        peak_reading < base + 100,
        "reading the log grew the daemon from {base} MiB to {peak_reading} MiB"
    );
}

#[test]
fn ten_thousand_progress_lines_with_100_kb_params_are_coalesced() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let (base, _) = memory_mib(&daemon);
    let task = nu.json(
        r#"orch submit --params {blob: ('' | fill -c p -w 100000)} --nu '
            for i in 1..10000 { print ({progress: ($i / 100), message: $"step ($i)"} | to json -r) }
        ' | orch wait | first | select status progress"#,
    );
    assert_eq!(
        task,
        serde_json::json!({"status": "succeeded", "progress": 100.0})
    );
    let (_, peak) = memory_mib(&daemon);
    eprintln!("10,000 progress lines, 100 KB params: RSS at start {base} MiB, peak {peak} MiB");
    assert!(
        peak < base + 100,
        "the daemon grew from {base} MiB to {peak} MiB"
    );
    let message = nu.json("orch task 1 | get progress_message");
    assert_eq!(message, "step 10000");
    let events =
        nu.json("orch watch --task 1 | where event == progress | get details.progress.message");
    let events = events.as_array().expect("a list");
    assert!(!events.is_empty(), "no progress event was delivered");
    assert!(events.len() <= 10_000);
    assert_eq!(events.last(), Some(&serde_json::json!("step 10000")));
    eprintln!("progress events delivered: {}", events.len());
    let log = std::fs::read_to_string(daemon.data_dir().join("logs/1.log")).unwrap();
    assert_eq!(log.lines().count(), 10_000, "every line is kept in the log");
}

#[test]
fn a_1_mib_param_reaches_params_in_a_snippet_and_a_script() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let script = daemon.dir().join("size.nu");
    std::fs::write(
        &script,
        "def main [] {\n  print $\"script ($params.blob | str length)\"\n  print (ls -l $env.ORCH_PARAMS_FILE | first | get mode)\n  ^sh -c 'echo child runs'\n}\n",
    )
    .unwrap();
    let tasks = nu.json(&format!(
        r#"let blob = ('' | fill -c b -w 1048576)
        [
            {{nu: 'print $"snippet ($params.blob | str length)"; ^sh -c "echo child runs"', params: {{blob: $blob}}}}
            {{script: '{}', params: {{blob: $blob}}}}
            {{nu: 'print $"small ($params.n) ($env.ORCH_PARAMS)"', params: {{n: 1}}}}
        ] | orch submit | orch wait | get status"#,
        script.display()
    ));
    assert_eq!(
        tasks,
        serde_json::json!(["succeeded", "succeeded", "succeeded"])
    );
    let log = |id| std::fs::read_to_string(daemon.data_dir().join(format!("logs/{id}.log")));
    assert_eq!(log(1).unwrap(), "snippet 1048576\nchild runs\n");
    assert_eq!(log(2).unwrap(), "script 1048576\nrw-------\nchild runs\n");
    assert_eq!(log(3).unwrap(), "small 1 {\"n\":1}\n");
    let params_dir = daemon.data_dir().join("params");
    let left: Vec<PathBuf> = std::fs::read_dir(&params_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert!(left.is_empty(), "parameters files left behind: {left:?}");
}

#[test]
fn an_environment_too_large_to_start_is_refused_at_submit() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let one = nu
        .try_run("orch submit --env {BIG: ('' | fill -c e -w 200000)} echo hi")
        .expect_err("a 200 kB variable cannot be passed");
    assert!(one.contains("env") && one.contains("BIG"), "{one}");
    let many = nu
        .try_run(
            "orch submit --env (1..12 | each {|i| {name: $'V($i)', value: ('' | fill -c e -w 100000)} } | transpose -r -d) echo hi",
        )
        .expect_err("1.2 MB of variables cannot be passed");
    assert!(
        many.contains("env") && many.contains("environment variables take"),
        "{many}"
    );
    let count = nu.json("orch tasks | length");
    assert_eq!(count, 0, "nothing was created");
}

/// Sets the daemon's limit on open files.
fn limit_open_files(pid: u32, limit: u64) {
    let rlimit = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: prlimit(2) reads the limit from a valid struct and writes nothing back (the
    // old limit pointer is null).
    let rc = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_NOFILE,
            &rlimit,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit failed: {}", std::io::Error::last_os_error());
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

fn get_task(client: &mut orch_protocol::Client, id: u64) -> orch_protocol::Task {
    match client
        .call(&Request::Get { id })
        .expect("the daemon answers")
    {
        Response::Task { task } => *task,
        other => panic!("unexpected answer: {other:?}"),
    }
}

/// The pid of the supervisor of `data_dir` (the daemon starts it as it starts).
fn supervisor_pid(data_dir: &std::path::Path) -> u32 {
    eventually(Duration::from_secs(10), "the supervisor", || {
        let pids = orch_e2e::supervisor_pids(data_dir);
        pids.first().map(|pid| *pid as u32)
    })
}

#[test]
fn running_out_of_file_descriptors_delays_a_start_without_failing_it() {
    // Tasks are started by the data directory's supervisor, so it is the one whose
    // descriptors run out: each running task holds two (its output pipes).
    let daemon = Daemon::start(&["--parallel", "30"]);
    let mut client = daemon.client();
    let supervisor = supervisor_pid(&daemon.data_dir());
    limit_open_files(supervisor, open_fds(supervisor) as u64 + 12);
    let gate = daemon.dir().join("gate");
    let held = format!("while [ ! -f {} ]; do sleep 0.05; done", gate.display());
    let specs = (0..30)
        .map(|_| TaskSpec::command("sh", vec!["-c".into(), held.clone()]))
        .collect();
    let answer = client
        .call(&Request::Submit {
            tasks: specs,
            stashed: false,
        })
        .expect("the daemon answers");
    assert!(matches!(answer, Response::Tasks { .. }), "{answer:?}");
    let deferred = eventually(Duration::from_secs(20), "a deferred start", || {
        (1..=30).map(|id| get_task(&mut client, id)).find(|task| {
            task.state.status().as_str() == "retry_waiting" && task.attempts.is_empty()
        })
    });
    std::fs::write(&gate, "").unwrap();
    for id in 1..=30 {
        let done = eventually(Duration::from_secs(60), "the tasks to succeed", || {
            let task = get_task(&mut client, id);
            task.state.status().is_final().then_some(task)
        });
        assert_eq!(done.state.status().as_str(), "succeeded", "{done:?}");
        assert_eq!(done.attempts.len(), 1, "no attempt was used up: {done:?}");
    }
    let nu = daemon.nu();
    let events = nu.json(&format!("orch watch --task {} | get event", deferred.id));
    let events: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(
        events[..3],
        ["submitted", "started", "start_deferred"],
        "{events:?}"
    );
    assert_eq!(
        events[events.len() - 2..],
        ["started", "succeeded"],
        "{events:?}"
    );
}

#[test]
fn a_task_log_stops_at_its_size_limit_and_the_outcome_is_kept() {
    let daemon = Daemon::start(&["--max-log-bytes", "100000"]);
    let nu = daemon.nu();
    let task = nu.json(
        r#"orch submit [sh -c 'head -c 1000000 /dev/zero | tr "\000" y; echo; echo done; exit 3'] | orch wait | first | select status exit_code"#,
    );
    assert_eq!(
        task,
        serde_json::json!({"status": "failed", "exit_code": 3})
    );
    let log = std::fs::read_to_string(daemon.data_dir().join("logs/1.log")).unwrap();
    let marker =
        "\n--- orch: the log reached its limit of 100000 bytes; further output is discarded ---\n";
    assert!(
        log.ends_with(marker),
        "{}",
        &log[log.len().saturating_sub(200)..]
    );
    assert_eq!(log.len(), 100_000 + marker.len());
    assert_eq!(
        nu.run("orch logs 1 | str length").trim(),
        log.len().to_string()
    );
}

/// A tmpfs mounted on a directory, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_stops_a_task_log_not_the_daemon() {
    let daemon = Daemon::start(&[]);
    let logs = daemon.data_dir().join("logs");
    let Some(_tmpfs) = Tmpfs::mount(&logs, "8m") else {
        eprintln!("SKIPPED: cannot mount a tmpfs here");
        return;
    };
    let nu = daemon.nu();
    let task = nu.json(
        r#"orch submit [sh -c 'head -c 20000000 /dev/zero | tr "\000" z; exit 5'] | orch wait | first | select status exit_code"#,
    );
    assert_eq!(
        task,
        serde_json::json!({"status": "failed", "exit_code": 5})
    );
    let log = std::fs::read_to_string(logs.join("1.log")).unwrap();
    assert!(
        log.ends_with("--- orch: the disk is nearly full (the store needs the space); further output is discarded ---\n"),
        "{}",
        &log[log.len().saturating_sub(200)..]
    );
    // The disk filled up to the end: the next task's log cannot even be written, and its
    // outcome is still recorded.
    let filler = logs.join("filler");
    let _ = Command::new("sh")
        .arg("-c")
        .arg(format!("cat /dev/zero > {}", filler.display()))
        .status();
    let next = nu.json("orch submit [sh -c 'echo lost; exit 0'] | orch wait | first | get status");
    assert_eq!(next, "succeeded");
    nu.run("orch health");
}
