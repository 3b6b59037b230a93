//! Command-line flags and the settings derived from them.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use crate::policy::Role;
use orch_protocol::paths;

pub mod database;
pub mod layers;

pub use database::{DatabaseUrl, DatabaseUrlError, SecretArg};

/// The store backends this build knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StorageType {
    /// An embedded redb database file in the data directory (the default).
    Redb,
    /// A PostgreSQL database (`--database-url`); the data directory still holds the task
    /// logs, the daemon's log, its tokens and the supervisor.
    Postgres,
}

/// How the HTTP shim authenticates requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HttpAuth {
    /// Bearer tokens with roles.
    Token,
    /// No authentication (loopback only).
    None,
}

/// provisioning-orchestrator: the durable task queue and runner behind the `orch`
/// Nushell commands.
#[derive(Debug, Clone, Parser)]
#[command(name = "provisioning-orchestrator", version, about, long_about = None)]
pub struct Cli {
    /// Directory for the database, task logs and the daemon's own log. Created (mode 0700)
    /// if missing. Default: $XDG_DATA_HOME/provisioning-orchestrator, else
    /// ~/.local/share/provisioning-orchestrator.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// A TOML file of settings (the flags' long names as keys: `parallel = 4`,
    /// `label = ["docker"]`). Default: $PROVISIONING_ORCHESTRATOR_CONFIG, else config.toml
    /// in the data directory when it exists. Every flag can also be set by
    /// PROVISIONING_ORCHESTRATOR_<FLAG> (`PROVISIONING_ORCHESTRATOR_PARALLEL=4`); the
    /// command line wins over the environment, which wins over the file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Where settings came from besides the command line (the environment, a config
    /// file), for the daemon's log.
    #[arg(skip)]
    pub settings_from: Vec<String>,

    /// Unix socket to listen on (created mode 0600). Default:
    /// $PROVISIONING_ORCHESTRATOR_SOCKET, else $XDG_RUNTIME_DIR/provisioning-orchestrator.sock,
    /// else /tmp/provisioning-orchestrator-<uid>.sock.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,

    /// Where state is kept: `redb`, an embedded file in the data directory (the default),
    /// or `postgres`, a PostgreSQL database (--database-url).
    #[arg(long, value_enum, default_value_t = StorageType::Redb)]
    pub storage_type: StorageType,

    /// The database of `--storage-type postgres`: postgres://USER[:PASSWORD]@HOST:PORT/DB.
    /// Else read from --database-url-file, else from $PROVISIONING_ORCHESTRATOR_DATABASE_URL.
    /// Its password is never logged or shown.
    #[arg(long, value_name = "URL", value_parser = SecretArg::given)]
    pub database_url: Option<SecretArg>,

    /// A file whose first line is the database URL (a secret mounted as a file), instead
    /// of --database-url.
    #[arg(long, value_name = "PATH")]
    pub database_url_file: Option<PathBuf>,

    /// This daemon's name in its cluster (`--storage-type postgres`): letters, digits,
    /// `.`, `_` and `-`, at most 63. Default: the host's name and a digest of the data
    /// directory, the same at every start.
    #[arg(long, value_name = "NAME", value_parser = crate::cluster::parse_node_name)]
    pub node: Option<String>,

    /// A label of this node (`docker`, `region=eu-west`; repeatable): a task submitted
    /// with `--on LABEL` runs only on a node that has it. Shown by `orch cluster nodes`.
    #[arg(long = "label", value_name = "LABEL", value_parser = crate::cluster::parse_label)]
    pub labels: Vec<String>,

    /// How long a node's lease lasts (`--storage-type postgres`): renewed ten times in
    /// it; a leader that cannot renew it stops its tasks' processes a second before it
    /// runs out, and another node takes over once it has. Between 2s and 5min.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = crate::cluster::parse_lease)]
    pub node_lease: std::time::Duration,

    /// `$PROVISIONING_ORCHESTRATOR_DATABASE_URL`, taken out of the environment at start
    /// ([`Cli::take_database_url_env`]) so that no task or child process inherits it.
    #[arg(skip)]
    pub database_url_env: Option<String>,

    /// Also serve the REST API over HTTP on this port (on 127.0.0.1 unless --bind says
    /// otherwise). Every route but /health and /openapi.json needs a bearer token from
    /// tokens.json in the data directory (created at the first start with --port).
    #[arg(long, value_name = "N")]
    pub port: Option<u16>,

    /// The address the HTTP shim listens on.
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1",
        requires = "port"
    )]
    pub bind: std::net::IpAddr,

    /// How HTTP requests are authenticated: `token` (bearer tokens with roles, the
    /// default) or `none` (every request is an admin: only for a loopback address, for
    /// local experiments such as the seed's curl examples).
    #[arg(long, value_enum, default_value_t = HttpAuth::Token, requires = "port")]
    pub http_auth: HttpAuth,

    /// Let another local user use the socket with a role: `UID:viewer`, `UID:operator` or
    /// `UID:admin` (repeatable). The socket is then created mode 0666 (its directory must
    /// let them reach it); every connection is still checked by its peer uid, and users
    /// not listed are refused. Without it the socket is owner-only.
    #[arg(long = "allow-user", value_name = "UID:ROLE", value_parser = parse_grant)]
    pub allow_users: Vec<(u32, Role)>,

    /// How many tasks may run at the same time.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub parallel: u32,

    /// The `nu` binary used for Nushell tasks.
    #[arg(
        long,
        value_name = "PATH",
        env = "ORCH_NU_BINARY",
        default_value = "nu"
    )]
    pub nu_binary: PathBuf,

    /// Directory of the extensions (providers/, taskservs/, clusters/). Default: a
    /// nushell-modules directory next to (or above) the executable, else
    /// $XDG_DATA_HOME/provisioning/nushell-modules (where scripts/install.sh puts it).
    #[arg(long = "modules", value_name = "DIR", env = "PROVISIONING_MODULES")]
    pub modules: Option<PathBuf>,

    /// The workspace whose infras (`infra/<name>/settings.toml`) workflows use when a
    /// request names none. Default: the directory the daemon was started in.
    #[arg(long, value_name = "DIR", env = "PROVISIONING_WORKSPACE")]
    pub workspace: Option<PathBuf>,

    /// The largest a task's log may grow, in bytes (all its attempts together); later
    /// output is discarded after one line saying so.
    #[arg(long, value_name = "BYTES", default_value_t = crate::runner::DEFAULT_MAX_LOG_BYTES, value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_log_bytes: u64,

    /// How many test environments may exist at once (created and not deleted).
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub max_test_envs: u32,

    /// The time to live of a test environment whose request gives none (`30min`, `2h`).
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = humantime::parse_duration)]
    pub test_env_ttl: std::time::Duration,

    /// How long a new socket connection may take to send its whole handshake.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    pub handshake_timeout: std::time::Duration,

    /// How long a request may take to arrive once it has started: the rest of a socket
    /// frame after its first byte; HTTP request headers (from the connection's opening or
    /// the previous answer, so idle HTTP keep-alive connections close after it too) and an
    /// HTTP request body.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub read_timeout: std::time::Duration,

    /// How long a socket connection may stay silent between requests before it is closed.
    /// A connection waiting for an answer or following a stream (watch, logs --follow) is
    /// not idle, however long that takes.
    #[arg(long, value_name = "DURATION", default_value = "10min", value_parser = humantime::parse_duration)]
    pub idle_timeout: std::time::Duration,

    /// How many socket connections may be open at once; past it a new client gets an
    /// `unavailable` error naming this limit.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_socket_connections: u32,

    /// How many HTTP connections may be open at once; past it a new client gets a 503.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_http_connections: u32,

    /// How many bytes of requests (socket frames and HTTP bodies being received) all
    /// connections together may hold in memory (at least 16 MiB, the largest frame). A
    /// request that does not fit waits for room until --read-timeout, then is refused.
    #[arg(long, value_name = "BYTES", default_value_t = 64 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(16 * 1024 * 1024..=1 << 40))]
    pub max_buffered_bytes: u64,

    /// Log only to orchestrator.log in the data directory, not to stderr (start-up errors
    /// still go to stderr). `orch daemon start` uses this.
    #[arg(long, short)]
    pub quiet: bool,

    /// Log filter for the daemon's own log (tracing's EnvFilter syntax, e.g. `debug`).
    #[arg(long, value_name = "FILTER", env = "ORCH_LOG", default_value = "info")]
    pub log: String,

    /// The size at which orchestrator.log is rotated (`64MiB`, `512KiB`, or bytes): it
    /// becomes orchestrator.log.1 (the one before, .2, and so on) and a new file starts.
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = crate::logging::parse_size)]
    pub log_max_size: u64,

    /// How many rotated logs to keep (orchestrator.log.1 to .N); older ones are removed.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub log_keep: u32,

    /// Archive audit entries older than this (`90days`, `720h`) to sealed segment files in
    /// the data directory's `audit/`, checked at start and every tenth of it (at most
    /// daily). Each run is recorded by its checkpoint entry. Without it, entries are
    /// archived only on request (`orch audit compact`).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub retain_audit: Option<std::time::Duration>,

    /// Run attempts as the daemon's own children instead of under the data directory's
    /// supervisor process: a daemon crash, restart or upgrade then interrupts every
    /// running attempt (see docs/benchmarks.md for what the supervisor costs).
    #[arg(long)]
    pub no_supervisor: bool,

    /// How long the supervisor lets attempts run with no daemon connected before it
    /// stops them (`30min`, `2h`). Default: for ever (the next daemon takes them over).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub supervisor_grace: Option<std::time::Duration>,

    /// Remove finished tasks and workflows (their records and logs) this
    /// long after they finished (`30d`, `12h`, or `never`, the default), checked at start
    /// and every tenth of the shortest retention (between a second and an hour). What a
    /// kept task depends on stays; a workflow goes as a whole, once it and all its tasks
    /// are final.
    #[arg(long, value_name = "RETENTION", value_parser = crate::retention::policy::parse_keep)]
    pub retain_finished: Option<crate::engine::Keep>,

    /// A retention for finished tasks with this label, longer or shorter than
    /// --retain-finished (`LABEL=RETENTION`, such as `servers=90d` or `ci=never`;
    /// repeatable). A workflow is kept as long as the longest of its tasks' labels says.
    #[arg(long = "retain-label", value_name = "LABEL=RETENTION", value_parser = crate::retention::policy::parse_label)]
    pub retain_labels: Vec<(String, crate::engine::Keep)>,

    /// Remove events this long after they were logged (`7d`, or `never`, the default). A
    /// watch from before the oldest kept event is refused with the point to resume from.
    #[arg(long, value_name = "RETENTION", value_parser = crate::retention::policy::parse_keep)]
    pub retain_events: Option<crate::engine::Keep>,

    /// A tool to run instead of the daemon.
    #[command(subcommand)]
    pub tool: Option<Tool>,
}

/// Tools the binary runs instead of the daemon, with no daemon needed.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Tool {
    /// The audit log's archived segments.
    #[command(subcommand)]
    Audit(AuditTool),
    /// Copy a whole store into an empty one, offline, and check the copy: from redb to
    /// PostgreSQL or back. Each side is a data directory (its orchestrator.redb) or a
    /// postgres:// URL. No daemon may be using either. Task logs and archived audit
    /// segments stay in the data directory; start the daemon on the new store with the same
    /// --data-dir. Prints a JSON report.
    Migrate {
        /// The store to copy: a data directory or a postgres:// URL.
        #[arg(long, value_name = "DIR|URL")]
        from: String,
        /// The empty store to copy into (a data directory is created if missing).
        #[arg(long, value_name = "DIR|URL")]
        to: String,
    },
    /// Fold the journal of a stopped daemon's redb store into its file (a checkpoint), so
    /// that `orchestrator.redb` alone holds every commit: before copying the file or
    /// reading it with other tools. No daemon may be using it. Prints a JSON report.
    Checkpoint {
        /// The data directory.
        dir: PathBuf,
    },
    /// Print the completion script of these flags and tools for a shell: `nu` (source
    /// it, or save it in nu's autoload directory), bash, zsh, fish, elvish, powershell.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: crate::completions::Shell,
    },
    /// Supervise the attempts of a data directory (started by the daemon, never by hand).
    #[command(hide = true)]
    Supervise {
        /// The data directory.
        dir: PathBuf,
    },
}

/// `audit ...` tools.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum AuditTool {
    /// Check an archived audit segment (such as one saved by `orch audit export`) on its
    /// own: its entries' hash chain, the range its name gives, and with --sha256 that it
    /// is the file its checkpoint sealed. Prints a JSON report; exits 1 when it is not
    /// intact.
    VerifySegment {
        /// The segment file.
        file: PathBuf,
        /// The SHA-256 its checkpoint sealed (the `sha256` column of `orch audit segments`).
        #[arg(long, value_name = "HEX")]
        sha256: Option<String>,
    },
}

/// A setting that cannot work, found before anything starts.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Unauthenticated HTTP on an address other machines can reach.
    #[error(
        "--http-auth none is only allowed on a loopback address, not {0}: use --http-auth token (the default) or --bind 127.0.0.1"
    )]
    OpenHttpNotLoopback(std::net::IpAddr),
    /// A directory flag names something that is not an existing directory.
    #[error("{flag} {}: not an existing directory", .path.display())]
    NotADirectory {
        /// The flag, such as `--workspace`.
        flag: &'static str,
        /// What it named.
        path: PathBuf,
    },
    /// The current directory (the default workspace) cannot be read.
    #[error("cannot read the current directory (the default --workspace): {0}")]
    CurrentDir(std::io::Error),
    /// The database URL is missing, given twice, or unusable.
    #[error(transparent)]
    DatabaseUrl(#[from] DatabaseUrlError),
    /// A cluster flag without the shared store it needs, or a setting a cluster cannot
    /// honour.
    #[error("{0}")]
    Cluster(String),
    /// The `--log` filter does not parse.
    #[error("--log {filter:?} is not a valid log filter: {error}")]
    LogFilter {
        /// The filter as given.
        filter: String,
        /// Why it does not parse.
        error: String,
    },
}

impl Cli {
    /// Checks every setting that can be checked without side effects, so that a start
    /// that cannot work is refused before the socket, the store or the engine exist.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.port.is_some() && self.http_auth == HttpAuth::None && !self.bind.is_loopback() {
            return Err(ConfigError::OpenHttpNotLoopback(self.bind));
        }
        if let Some(dir) = &self.modules {
            existing_dir("--modules", dir)?;
        }
        match &self.workspace {
            Some(dir) => existing_dir("--workspace", dir)?,
            None => {
                std::env::current_dir().map_err(ConfigError::CurrentDir)?;
            }
        }
        crate::logging::filter(&self.log).map_err(|error| ConfigError::LogFilter {
            filter: self.log.clone(),
            error,
        })?;
        self.database_url()?;
        self.check_cluster_flags()
    }

    /// Cluster flags need `--storage-type postgres`; a node needs its supervisor, the
    /// only process that can stop the node's tasks while the daemon is paused.
    fn check_cluster_flags(&self) -> Result<(), ConfigError> {
        let clustered = self.storage_type == StorageType::Postgres;
        let lease_given = self.node_lease != crate::cluster::DEFAULT_LEASE;
        if !clustered && (self.node.is_some() || lease_given) {
            return Err(ConfigError::Cluster(
                "--node and --node-lease are settings of a cluster node: they need --storage-type postgres".into(),
            ));
        }
        if clustered && self.no_supervisor {
            return Err(ConfigError::Cluster(
                "--no-supervisor cannot be used with --storage-type postgres: a node that loses its lease must have its tasks' processes stopped, which only the supervisor can do while the daemon is paused or gone".into(),
            ));
        }
        Ok(())
    }

    /// The PostgreSQL URL of `--storage-type postgres` (see [`database::resolve`]); none
    /// for the embedded store.
    pub fn database_url(&self) -> Result<Option<DatabaseUrl>, DatabaseUrlError> {
        database::resolve(
            self.storage_type == StorageType::Postgres,
            self.database_url.as_ref(),
            self.database_url_file.as_deref(),
            self.database_url_env.clone(),
        )
    }

    /// Moves `$PROVISIONING_ORCHESTRATOR_DATABASE_URL` from the environment into
    /// `database_url_env`: the password it may hold must not reach the tasks (they inherit
    /// the daemon's environment) or the supervisor.
    ///
    /// # Safety
    /// Changes the process environment: call it before any other thread exists (first
    /// thing in `main`).
    pub unsafe fn take_database_url_env(&mut self) {
        self.database_url_env = std::env::var(database::DATABASE_URL_ENV).ok();
        // SAFETY: the caller guarantees no other thread runs (see above).
        unsafe { std::env::remove_var(database::DATABASE_URL_ENV) };
    }

    /// The data directory, with the default applied.
    pub fn data_dir(&self) -> PathBuf {
        self.data_dir
            .clone()
            .unwrap_or_else(paths::default_data_dir)
    }

    /// The extensions directory, with the default applied.
    pub fn modules_dir(&self) -> PathBuf {
        if let Some(dir) = &self.modules {
            return dir.clone();
        }
        let beside_executable = std::env::current_exe().ok().and_then(|exe| {
            exe.ancestors()
                .skip(1)
                .map(|dir| dir.join("nushell-modules"))
                .find(|dir| dir.join("provisioning").is_dir())
        });
        beside_executable.unwrap_or_else(|| {
            paths::default_data_dir()
                .with_file_name("provisioning")
                .join("nushell-modules")
        })
    }

    /// The workspace, with the default applied.
    pub fn workspace(&self) -> std::io::Result<PathBuf> {
        match &self.workspace {
            Some(dir) => Ok(dir.clone()),
            None => std::env::current_dir(),
        }
    }

    /// The socket path, with the default applied.
    pub fn socket(&self) -> PathBuf {
        self.socket
            .clone()
            .unwrap_or_else(paths::default_socket_path)
    }
}

fn existing_dir(flag: &'static str, path: &std::path::Path) -> Result<(), ConfigError> {
    if path.is_dir() {
        Ok(())
    } else {
        Err(ConfigError::NotADirectory {
            flag,
            path: path.to_path_buf(),
        })
    }
}

/// `UID:ROLE` for `--allow-user`.
fn parse_grant(text: &str) -> Result<(u32, Role), String> {
    let (uid, role) = text
        .split_once(':')
        .ok_or_else(|| format!("`{text}` is not UID:ROLE (for example 1001:viewer)"))?;
    let uid = uid
        .parse()
        .map_err(|_| format!("`{uid}` is not a numeric uid"))?;
    let role = match role {
        "viewer" => Role::Viewer,
        "operator" => Role::Operator,
        "admin" => Role::Admin,
        other => {
            return Err(format!(
                "`{other}` is not a role: viewer, operator or admin"
            ));
        }
    };
    Ok((uid, role))
}
