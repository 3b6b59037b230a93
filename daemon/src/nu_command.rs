//! The one way the daemon starts the processes it runs for others: task attempts (the
//! runner) and test-environment scripts (testenv).
//!
//! Each is `nu -n -c '<prelude><code>'` (a snippet), `nu --env-config <prelude file>
//! <script>` (a script file: `--env-config` loads nothing else for a script), or, for task
//! attempts, a plain program. Every one gets the same rules:
//!
//! - parameters as JSON in `ORCH_PARAMS`, or, when larger than [`INLINE_PARAMS_MAX`], in
//!   a private file named by `ORCH_PARAMS_FILE` (removed when its [`ParamsFile`] is
//!   dropped); [`PRELUDE`] reads either into `$params`;
//! - the markers that let the next daemon stop what a crashed one left running
//!   ([`crate::orphans`]): the daemon's data directory, and the task and attempt or the
//!   test environment;
//! - the umask the daemon was started with, a process group of its own, stdin closed.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use orch_protocol::{EnvId, TaskId};

/// The Nushell code run before every Nushell snippet and script: `$params` from the file
/// or the environment variable.
pub const PRELUDE: &str = "let params = (if ($env.ORCH_PARAMS_FILE? | is-not-empty) { open --raw $env.ORCH_PARAMS_FILE } else { $env.ORCH_PARAMS? | default 'null' } | from json)\n";

/// Parameters up to this size (as JSON) are passed in `ORCH_PARAMS`; larger ones in a
/// file. Linux refuses a single environment string over 128 KiB.
pub const INLINE_PARAMS_MAX: usize = 64 * 1024;

/// The environment variable holding the parameters (JSON) when they are small.
pub const PARAMS_ENV: &str = "ORCH_PARAMS";

/// The environment variable naming the parameters file when they are large.
pub const PARAMS_FILE_ENV: &str = "ORCH_PARAMS_FILE";

/// The environment variable holding the attempt number of a task's process.
pub const ATTEMPT_ENV: &str = "ORCH_ATTEMPT";

/// Where the parameters files of running processes are kept (private; the runner creates
/// it at start, removing what a crashed daemon left).
pub fn params_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("params")
}

/// What the process runs.
pub enum Program<'a> {
    /// A Nushell snippet, run after [`PRELUDE`].
    Snippet(&'a str),
    /// A Nushell script file, with `prelude` (a file holding [`PRELUDE`]) as its
    /// environment configuration.
    Script {
        /// The file holding [`PRELUDE`].
        prelude: &'a Path,
        /// The script.
        script: &'a Path,
    },
    /// A program started directly with its arguments (no shell, no Nushell).
    Plain {
        /// The program.
        program: &'a str,
        /// Its arguments.
        args: &'a [String],
    },
}

/// Whom the process belongs to: the marker the next daemon looks for after a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// An attempt of a task.
    Task {
        /// The task.
        id: TaskId,
        /// The attempt (1-based).
        attempt: u32,
    },
    /// An install, probe or test script of a test environment.
    TestEnv(EnvId),
}

/// A parameters file, removed when dropped (when the process it was written for ended).
pub struct ParamsFile(PathBuf);

impl ParamsFile {
    /// Writes `json` to a new private (0600) file at `path`.
    fn write(path: &Path, json: &str) -> std::io::Result<ParamsFile> {
        let file = ParamsFile(path.to_path_buf());
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .and_then(|mut f| f.write_all(json.as_bytes()))?;
        Ok(file)
    }
}

impl Drop for ParamsFile {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.0) {
            tracing::warn!(file = %self.0.display(), error = %e, "cannot delete a parameters file");
        }
    }
}

/// A process to start, built by [`NuCommand::build`].
pub struct NuCommand<'a> {
    nu: &'a Path,
    program: Program<'a>,
    owner: Owner,
    data_dir: &'a Path,
    cwd: &'a Path,
    env: BTreeMap<String, OsString>,
}

impl<'a> NuCommand<'a> {
    /// `program` run with the `nu` binary `nu` for `owner`, a process of the daemon whose
    /// data directory is `data_dir` (also its working directory unless [`Self::cwd`]
    /// says otherwise).
    pub fn new(
        nu: &'a Path,
        program: Program<'a>,
        owner: Owner,
        data_dir: &'a Path,
    ) -> NuCommand<'a> {
        NuCommand {
            nu,
            program,
            owner,
            data_dir,
            cwd: data_dir,
            env: BTreeMap::new(),
        }
    }

    /// Runs it in `cwd`.
    pub fn cwd(mut self, cwd: &'a Path) -> Self {
        self.cwd = cwd;
        self
    }

    /// Adds an environment variable. The markers and the parameters are set after these,
    /// so no caller's value can replace them.
    pub fn env(mut self, key: &str, value: impl Into<OsString>) -> Self {
        self.env.insert(key.to_string(), value.into());
        self
    }

    /// Adds environment variables (see [`Self::env`]).
    pub fn envs(mut self, vars: &BTreeMap<String, String>) -> Self {
        for (key, value) in vars {
            self.env.insert(key.clone(), value.into());
        }
        self
    }

    /// The process, with `params` inline or, when large, written to `params_file` (which
    /// must outlive the process: the returned guard removes it). The only error is that
    /// file's.
    pub fn build(
        self,
        params: &serde_json::Value,
        params_file: &Path,
    ) -> std::io::Result<(tokio::process::Command, Option<ParamsFile>)> {
        let path = self
            .env
            .get("PATH")
            .cloned()
            .or_else(|| std::env::var_os("PATH"));
        let found = |program: &OsStr| find_program(program, path.as_deref(), self.cwd);
        let mut process = match self.program {
            Program::Snippet(code) => {
                let mut p = tokio::process::Command::new(found(self.nu.as_os_str()));
                p.arg("-n").arg("-c").arg(format!("{PRELUDE}{code}"));
                p
            }
            Program::Script { prelude, script } => {
                let mut p = tokio::process::Command::new(found(self.nu.as_os_str()));
                p.arg("--env-config").arg(prelude).arg(script);
                p
            }
            Program::Plain { program, args } => {
                let mut p = tokio::process::Command::new(found(OsStr::new(program)));
                p.args(args);
                p
            }
        };
        process
            .current_dir(self.cwd)
            .envs(&self.env)
            .env(crate::orphans::DATA_DIR_ENV, self.data_dir)
            .stdin(Stdio::null())
            .process_group(0);
        match self.owner {
            Owner::Task { id, attempt } => process
                .env(crate::orphans::TASK_ENV, id.to_string())
                .env(ATTEMPT_ENV, attempt.to_string()),
            Owner::TestEnv(id) => process.env(crate::orphans::TEST_ENV_ENV, id.to_string()),
        };
        crate::child::restore(&mut process);
        let json = serde_json::to_string(params).expect("JSON values serialize");
        if json.len() <= INLINE_PARAMS_MAX {
            process.env_remove(PARAMS_FILE_ENV).env(PARAMS_ENV, json);
            return Ok((process, None));
        }
        let file = ParamsFile::write(params_file, &json)?;
        process.env_remove(PARAMS_ENV).env(PARAMS_FILE_ENV, &file.0);
        Ok((process, Some(file)))
    }
}

/// The file the child's `execvp` would run for `program`, looked up on `path` (the
/// child's `PATH`) here, so that the standard library can start the process with
/// posix_spawn (it falls back to a fork, which copies the parent's page tables, to search
/// a `PATH` the environment changes). A program with a `/` in its name, or one not found
/// (its start then fails as exec would), is left as it is; relative `PATH` entries (an
/// empty one is `.`) are taken from the child's working directory `cwd`. One difference
/// remains: a script without a `#!` line, which execvp runs with `/bin/sh`, fails to
/// start (ENOEXEC).
fn find_program(program: &OsStr, path: Option<&OsStr>, cwd: &Path) -> PathBuf {
    use std::os::unix::ffi::OsStrExt as _;
    if program.as_bytes().contains(&b'/') || program.is_empty() {
        return PathBuf::from(program);
    }
    let executable = |candidate: &Path| {
        let Ok(c_path) = std::ffi::CString::new(candidate.as_os_str().as_bytes()) else {
            return false;
        };
        // SAFETY: access(2) reads a NUL-terminated path and writes nothing.
        let runnable = unsafe { libc::access(c_path.as_ptr(), libc::X_OK) } == 0;
        runnable && std::fs::metadata(candidate).is_ok_and(|m| m.is_file())
    };
    let Some(path) = path else {
        // No PATH: execvp's default search is left to exec.
        return PathBuf::from(program);
    };
    std::env::split_paths(path)
        .map(|dir| {
            if dir.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                dir
            }
        })
        .map(|dir| cwd.join(dir).join(program))
        .find(|candidate| executable(candidate))
        .unwrap_or_else(|| PathBuf::from(program))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_on_the_childs_path_as_exec_would() {
        use std::os::unix::fs::PermissionsExt as _;
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let plain = a.join("tool");
        std::fs::write(&plain, "").unwrap(); // not executable: skipped
        let tool = b.join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::env::join_paths([&a, &b]).unwrap();
        let cwd = Path::new("/");
        assert_eq!(find_program(OsStr::new("tool"), Some(&path), cwd), tool);
        // Relative entries are the child's working directory's.
        let relative = OsStr::new("b");
        assert_eq!(
            find_program(OsStr::new("tool"), Some(relative), root.path()),
            tool
        );
        for kept in ["missing", "./tool", "/bin/sh"] {
            let found = find_program(OsStr::new(kept), Some(&path), cwd);
            assert_eq!(found, PathBuf::from(kept));
        }
        assert_eq!(
            find_program(OsStr::new("tool"), None, cwd),
            PathBuf::from("tool")
        );
    }

    fn envs(command: &tokio::process::Command) -> BTreeMap<String, Option<String>> {
        command
            .as_std()
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect()
    }

    fn args(command: &tokio::process::Command) -> Vec<String> {
        command
            .as_std()
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_snippet_runs_after_the_prelude_with_its_markers_and_inline_params() {
        let dir = tempfile::tempdir().unwrap();
        let (command, file) = NuCommand::new(
            Path::new("/bin/nu"),
            Program::Snippet("print $params.x"),
            Owner::TestEnv(7),
            dir.path(),
        )
        .env(crate::orphans::TEST_ENV_ENV, "999")
        .env("PROVISIONING_MODULES", "/m")
        .build(&serde_json::json!({"x": 1}), &dir.path().join("p.json"))
        .unwrap();
        assert!(file.is_none());
        assert_eq!(
            args(&command),
            ["-n", "-c", &format!("{PRELUDE}print $params.x")]
        );
        let envs = envs(&command);
        assert_eq!(
            envs["ORCH_TEST_ENV_ID"].as_deref(),
            Some("7"),
            "not the caller's"
        );
        assert_eq!(envs["ORCH_PARAMS"].as_deref(), Some(r#"{"x":1}"#));
        assert_eq!(envs["ORCH_PARAMS_FILE"], None, "removed");
        assert_eq!(envs["PROVISIONING_MODULES"].as_deref(), Some("/m"));
        assert_eq!(
            envs["ORCH_DATA_DIR"].as_deref(),
            Some(dir.path().to_str().unwrap())
        );
        assert_eq!(command.as_std().get_current_dir(), Some(dir.path()));
    }

    #[test]
    fn large_params_go_in_a_private_file_removed_with_its_guard() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("3-2.json");
        let big = serde_json::json!({"blob": "x".repeat(INLINE_PARAMS_MAX)});
        let prelude = dir.path().join("prelude.nu");
        let (command, file) = NuCommand::new(
            Path::new("/bin/nu"),
            Program::Script {
                prelude: &prelude,
                script: Path::new("/s.nu"),
            },
            Owner::Task { id: 3, attempt: 2 },
            dir.path(),
        )
        .cwd(Path::new("/"))
        .build(&big, &path)
        .unwrap();
        let envs = envs(&command);
        assert_eq!(envs["ORCH_PARAMS"], None);
        assert_eq!(envs["ORCH_PARAMS_FILE"].as_deref(), path.to_str());
        assert_eq!(envs["ORCH_TASK_ID"].as_deref(), Some("3"));
        assert_eq!(envs["ORCH_ATTEMPT"].as_deref(), Some("2"));
        assert_eq!(
            args(&command),
            ["--env-config", prelude.to_str().unwrap(), "/s.nu"]
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        drop(file);
        assert!(!path.exists(), "removed with its guard");
    }
}
