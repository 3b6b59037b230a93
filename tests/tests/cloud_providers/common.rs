//! What the provider tests share: the helper processes (stand-in, moto) and their guards,
//! running the provider modules in `nu` with a clean environment, the step context, and a
//! fake `ssh`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use orch_e2e::nu_binary;
use serde_json::{Value, json};
use tempfile::TempDir;

/// The environment variables the modules read: removed from every `nu` run so the
/// developer's own credentials never reach the tests (nor the tests' the real clouds).
const PROVIDER_ENV: &[&str] = &[
    "UPCLOUD_USERNAME",
    "UPCLOUD_PASSWORD",
    "UPCLOUD_TOKEN",
    "UPCLOUD_API_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_EC2_ENDPOINT",
    "AWS_PROFILE",
    "ORCH_PARAMS",
];

/// The full life cycle: create twice, status, delete twice, status.
pub const LIFE_CYCLE: &str = "
let first = create-server $server $ctx
let second = create-server $server $ctx
let status = server-status $server
delete-server $server $ctx
delete-server $server $ctx
{first: $first, second: $second, status: $status, after_delete: (server-status $server)}";

/// What [`LIFE_CYCLE`] must return for web-01: the second create gives the same server,
/// which is in `state`, and after the deletes it is missing.
pub fn assert_life_cycle(result: &Value, state: &str) {
    assert_eq!(
        result["second"], result["first"],
        "the second create returns the same"
    );
    assert_eq!(
        result["status"],
        json!({"hostname": "web-01", "exists": true, "state": state})
    );
    assert_eq!(
        result["after_delete"],
        json!({"hostname": "web-01", "exists": false, "state": "missing"})
    );
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is in the repository")
        .to_path_buf()
}

fn provider_module(name: &str) -> PathBuf {
    repo().join("nushell-modules/providers").join(name)
}

/// `$PYTHON` or `python3` on PATH.
fn python() -> PathBuf {
    std::env::var_os("PYTHON").map_or_else(|| PathBuf::from("python3"), PathBuf::from)
}

/// A helper process of `tests/standins/` in its own temporary directory, which prints one
/// line when it is ready; killed when dropped, even when the test fails.
pub struct Helper {
    child: Child,
    /// The first line it printed.
    pub ready: String,
    dir: TempDir,
}

impl Helper {
    /// Runs `python3 tests/standins/<script> <args>`; `args` may name files in `dir`
    /// through the placeholder `{dir}`.
    pub fn start(script: &str, args: &[&str]) -> Helper {
        let dir = tempfile::Builder::new()
            .prefix("orch-cloud-")
            .tempdir()
            .expect("a temp dir");
        let stderr = std::fs::File::create(dir.path().join("helper.stderr")).unwrap();
        let dir_text = dir.path().display().to_string();
        let mut child = Command::new(python())
            .arg(repo().join("tests/standins").join(script))
            .args(args.iter().map(|a| a.replace("{dir}", &dir_text)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {} for {script}: {e}", python().display()));
        // Guard first, so the process is killed if reading its first line fails.
        let stdout = child.stdout.take().expect("piped stdout");
        let mut helper = Helper {
            child,
            ready: String::new(),
            dir,
        };
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        assert!(
            !line.trim().is_empty(),
            "{script} did not start (the README's test command installs what it needs): {}",
            helper.stderr()
        );
        helper.ready = line.trim().to_string();
        helper
    }

    /// Its temporary directory (logs; the tests' fake ssh).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir().join("helper.stderr")).unwrap_or_default()
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a `nu` script in `dir` with the provider variables cleared, then `env` set;
/// `Ok(stdout)` or `Err(stderr)`.
pub fn run_nu(dir: &Path, script: &str, env: &[(&str, &str)]) -> Result<String, String> {
    let mut command = Command::new(nu_binary());
    command
        .arg("--no-config-file")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .stdin(Stdio::null());
    for name in PROVIDER_ENV {
        command.env_remove(name);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    let out = command.output().expect("nu runs");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// A script whose last value is returned as JSON; panics with stderr when it fails.
pub fn nu_json(dir: &Path, script: &str, env: &[(&str, &str)]) -> Value {
    let stdout = run_nu(dir, &format!("{script} | to json --raw"), env)
        .unwrap_or_else(|stderr| panic!("nu failed:\n{script}\n---\n{stderr}"));
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// A script expected to fail; returns its stderr.
pub fn nu_error(dir: &Path, script: &str, env: &[(&str, &str)]) -> String {
    match run_nu(dir, script, env) {
        Ok(stdout) => panic!("expected an error from:\n{script}\n---\nstdout: {stdout}"),
        Err(stderr) => stderr,
    }
}

/// The prelude of every script: the module, the step context of workflow 1's step
/// `create-server@<hostname>` (also in $env.ORCH_PARAMS, as the daemon sets it, for
/// server-exec and server-status) and the server record.
pub fn prelude(provider: &str, settings: Value, server: Value) -> String {
    let ctx = json!({
        "workflow": 1,
        "step": format!("create-server@{}", server["hostname"].as_str().unwrap()),
        "infra": {
            "name": "demo",
            "dir": "/tmp/demo",
            "settings": {
                "name": "demo",
                "provider": provider,
                "provider_settings": {provider: settings},
            },
        },
        "server": server,
    });
    format!(
        "use '{}' *\nlet ctx = ('{}' | from json)\nlet server = ('{}' | from json)\n$env.ORCH_PARAMS = ($ctx | to json)\n",
        provider_module(provider).display(),
        ctx,
        server,
    )
}

/// A fake `ssh` first on PATH: appends its arguments (one per line, then `--end--`) to
/// `ssh.log` and runs the remote command (its last argument) locally with `sh -c`, a
/// leading `sudo -n ` removed. Returns (PATH, the log).
pub fn fake_ssh(dir: &Path) -> (String, PathBuf) {
    let bin = dir.join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = dir.join("ssh.log");
    let script = format!(
        "#!/bin/sh\nfor a; do printf '%s\\n' \"$a\"; done >> '{log}'\necho --end-- >> '{log}'\nfor last; do :; done\ncase \"$last\" in \"sudo -n \"*) last=\"${{last#sudo -n }}\";; esac\nexec sh -c \"$last\"\n",
        log = log.display()
    );
    let path = bin.join("ssh");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let search = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (search, log)
}

/// The fake ssh's invocations, each a list of arguments.
pub fn ssh_calls(log: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.split("--end--\n")
        .filter(|c| !c.is_empty())
        .map(|c| c.lines().map(str::to_string).collect())
        .collect()
}

/// Standard base64 (for the expected Authorization and UserData values).
pub fn base64(text: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
