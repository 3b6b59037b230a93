//! How an attempt receives its parameters: as JSON in `ORCH_PARAMS`, or, when they are
//! too large for one environment variable, in a private file named by `ORCH_PARAMS_FILE`
//! (removed when the attempt ends). The Nushell prelude reads either into `$params`.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use tokio::process::Command as Process;

use super::{Launch, RunnerConfig, StartError};

/// Parameters up to this size (as JSON) are passed in `ORCH_PARAMS`; larger ones in a
/// file. Linux refuses a single environment string over 128 KiB.
pub const INLINE_PARAMS_MAX: usize = 64 * 1024;

/// The environment variable naming the parameters file of an attempt.
pub const PARAMS_FILE_ENV: &str = "ORCH_PARAMS_FILE";

/// The Nushell code run before every Nushell task: `$params` from the file or the
/// environment variable.
pub const PRELUDE: &str = "let params = (if ($env.ORCH_PARAMS_FILE? | is-not-empty) { open --raw $env.ORCH_PARAMS_FILE } else { $env.ORCH_PARAMS? | default 'null' } | from json)\n";

impl RunnerConfig {
    /// Where the parameters files of running attempts are kept (private).
    fn params_dir(&self) -> PathBuf {
        self.data_dir.join("params")
    }

    /// The prelude file Nushell scripts are started with (`nu --env-config`).
    pub(super) fn prelude_path(&self) -> PathBuf {
        self.params_dir().join("prelude.nu")
    }
}

/// Creates the private directory of parameters files (removing files a crashed daemon
/// left) and the prelude of Nushell scripts.
pub(super) fn prepare_dir(config: &RunnerConfig) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = config.params_dir();
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    crate::files::write_atomically(&config.prelude_path(), PRELUDE.as_bytes(), 0o600)
}

/// A parameters file, removed when the attempt ends.
pub(super) struct ParamsFile(PathBuf);

impl Drop for ParamsFile {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.0) {
            tracing::warn!(file = %self.0.display(), error = %e, "cannot delete a parameters file");
        }
    }
}

/// Gives `process` the attempt's parameters, in its environment or in a file; the file
/// (if any) must live until the attempt ends.
pub(super) fn pass_params(
    process: &mut Process,
    config: &RunnerConfig,
    launch: &Launch,
) -> Result<Option<ParamsFile>, StartError> {
    let params = serde_json::to_string(&launch.spec.params).expect("JSON values serialize");
    if params.len() <= INLINE_PARAMS_MAX {
        process
            .env_remove(PARAMS_FILE_ENV)
            .env("ORCH_PARAMS", params);
        return Ok(None);
    }
    let file = write_params(config, launch, &params)?;
    process
        .env_remove("ORCH_PARAMS")
        .env(PARAMS_FILE_ENV, &file.0);
    Ok(Some(file))
}

/// Writes the attempt's parameters to a private file.
fn write_params(
    config: &RunnerConfig,
    launch: &Launch,
    json: &str,
) -> Result<ParamsFile, StartError> {
    let path = config
        .params_dir()
        .join(format!("{}-{}.json", launch.id, launch.attempt));
    let file = ParamsFile(path.clone());
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| f.write_all(json.as_bytes()))
        .map_err(|e| StartError::of(&path.display().to_string(), &e))?;
    Ok(file)
}
