//! Where an attempt's parameters files live, and the prelude file Nushell scripts start
//! with. How parameters are passed (inline or in a file) is [`crate::nu_command`]'s.

use std::path::PathBuf;

use super::RunnerConfig;
use crate::nu_command::PRELUDE;

impl RunnerConfig {
    /// Where the parameters files of running attempts are kept (private).
    pub(super) fn params_dir(&self) -> PathBuf {
        crate::nu_command::params_dir(&self.data_dir)
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
