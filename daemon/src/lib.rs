//! The provisioning orchestrator daemon.
//!
//! Layout:
//! - [`config`]: command-line flags; [`completions`]: their completion scripts.
//! - [`audit`]: the hash-chained audit log of every change request.
//! - [`cluster`]: daemons sharing a PostgreSQL store: nodes, leadership, standby.
//! - [`redact`]: secrets hidden from readers below admin, on every interface.
//! - [`socket`]: binding the owner-only Unix socket, with stale-socket detection.
//! - [`ops`]: the application layer: the one table of operations (socket request, role,
//!   HTTP routes, OpenAPI entries) and each operation, returning domain values.
//! - [`policy`]: who may do what (roles, what an operation needs, who sees secrets).
//! - [`server`]: the socket adapter: the accept loop, the handshake, requests dispatched
//!   to their operations and answered as frames.
//! - [`engine`]: the priority queue, parallel limits, retries with backoff, timeouts,
//!   cancel, hard and soft dependencies, workflows with rollback, and crash recovery; one
//!   task owns all of it.
//! - [`extensions`]: providers, taskservs and cluster definitions read from manifests.
//! - [`notify`]: delivering notifications from the outbox (webhooks, command hooks).
//! - [`schedules`]: the times of a schedule (cron pattern, time zone).
//! - [`workflows`]: workflow requests expanded into a checked DAG of steps, and plans.
//! - [`testenv`]: test environments in containers (Docker API), with their recovery.
//! - [`runner`]: runs one attempt of a task as a process group, with its log and progress.
//! - [`nu_command`]: how every process the daemon runs for others is built (Nushell
//!   prelude, parameters, crash markers), shared by the runner and test environments.
//! - [`store`]: the [`store::Store`] trait, its redb backend, and the group committer.
//! - [`events`]: the one event bus, and the one stream (log replay, then the bus) that
//!   every watcher reads.
//! - [`orphans`]: stopping processes that a crashed daemon left running.
//! - [`http`]: the HTTP adapter (`--port`): the table's routes over the same operations,
//!   with tokens.
//! - [`metrics`]: Prometheus metrics (`prometheus-client`); [`activity`]: the last hour
//!   minute by minute, for the dashboard.
//! - [`files`]: small files written atomically beside the database; [`child`]: what
//!   every process the daemon starts gets back (umask, default signal actions);
//!   [`memory`]: freed memory given back to the system after a burst.
//! - [`shutdown`] and [`logging`]: signals and the daemon's own log.
//!
//! The rule everything follows: a state change is committed to the store before it is
//! acted on (a process started, a client answered, a dependant released).

pub mod activity;
pub mod audit;
pub mod child;
pub mod cluster;
pub mod completions;
pub mod config;
pub mod engine;
pub mod events;
pub mod extensions;
pub mod files;
pub mod http;
pub mod logging;
pub mod memory;
pub mod metrics;
pub mod migrate;
pub mod notify;
pub mod nu_command;
pub mod ops;
pub mod orphans;
pub mod policy;
pub mod redact;
pub mod retention;
pub mod runner;
pub mod schedules;
pub mod server;
pub mod shutdown;
pub mod socket;
pub mod store;
pub mod testenv;
pub mod workflows;

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use config::{Cli, StorageType};
use engine::{Engine, EngineParts};
use runner::{Runner, RunnerConfig};
use store::{GroupCommitter, PostgresStore, RedbStore, Store};

/// The database file's name in the data directory.
pub const STORE_FILE: &str = "orchestrator.redb";

/// Runs the daemon until it is told to stop.
///
/// Start-up checks everything that can be wrong before anything starts: the settings, the
/// socket path, the store, the HTTP address and its tokens. A refused start leaves the
/// data directory as it was (no log line, no new file) and runs no task.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    cli.validate()?;
    files::set_private_umask();
    let socket_path = cli.socket();
    let bound = socket::bind(&socket_path)?;
    let (listener, _socket_file) = (bound.listener, bound.file);
    let data_dir = cli.data_dir();
    files::create_private_dir(&data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    let data_dir = data_dir.canonicalize()?;
    let logs_dir = data_dir.join("logs");
    let (store, shared): (Arc<dyn Store>, _) = match cli.storage_type {
        StorageType::Redb => (Arc::new(open_redb(&data_dir, &logs_dir)?), None),
        StorageType::Postgres => {
            let store = Arc::new(open_postgres(&cli, &data_dir)?);
            (store.clone(), Some(store))
        }
    };
    files::create_private_dir(&logs_dir)
        .with_context(|| format!("cannot create {}", logs_dir.display()))?;
    let rotation = logging::Rotation {
        max_bytes: cli.log_max_size,
        keep: cli.log_keep,
    };
    let _log_guard = logging::init(&data_dir, &cli.log, cli.quiet, rotation)?;
    if bound.replaced_stale {
        tracing::info!(socket = %socket_path.display(), "replaced a stale socket");
    }
    for source in &cli.settings_from {
        tracing::info!(from = %source, "settings");
    }
    make_data_private(&data_dir, &logs_dir)?;
    if !cli.allow_users.is_empty() {
        // Others may connect; each connection is still checked by its peer uid.
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&socket_path, std::fs::Permissions::from_mode(0o666))?;
        tracing::info!(users = ?cli.allow_users, "other users allowed on the socket");
    }
    // HTTP is bound (and its tokens read) before the engine starts: a start that cannot
    // serve what was asked is refused before any task runs.
    let http_parts = match cli.port {
        Some(port) => Some(bind_http(&cli, port, &data_dir).await?),
        None => None,
    };
    let shutdown = CancellationToken::new();
    shutdown::cancel_on_signals(shutdown.clone())?;
    // Cancelled when a state change cannot be committed, or the node stands down: the
    // daemon stops at once, acting on nothing more (the next start, or the next leader,
    // recovers from the last durable state).
    let fatal = CancellationToken::new();
    let stop_serving = shutdown.clone();
    let on_fatal = fatal.clone();
    tokio::spawn(async move {
        on_fatal.cancelled().await;
        stop_serving.cancel();
    });
    let limits = Arc::new(server::limits::Limits::from_cli(&cli));
    let retention = Arc::new(retention::Policy::new(
        cli.retain_finished,
        &cli.retain_labels,
        cli.retain_events,
    ));
    let audit = Arc::new(audit::archive::Archive::open(&data_dir, store.clone())?);
    // Left last, once the engine's writes are done: until then the lease is renewed.
    let membership = match &shared {
        Some(shared) => {
            Some(cluster::start::join(&cli, shared.clone(), &data_dir, &socket_path, &fatal).await?)
        }
        None => None,
    };
    if let Some(shared) = &shared {
        cluster::start::sweep_logs(shared, &logs_dir, &retention, &shutdown);
    }
    let runner = Runner::new(RunnerConfig {
        nu_binary: cli.nu_binary.clone(),
        logs_dir: logs_dir.clone(),
        data_dir: data_dir.clone(),
        max_log_bytes: cli.max_log_bytes,
        supervise: !cli.no_supervisor,
        binary: std::env::current_exe().context("finding the daemon's own binary")?,
        supervisor_grace: cli.supervisor_grace,
    })
    .context("preparing the directory of task parameters")?;
    // Every node of a cluster runs the attempts placed on it, the leader's included.
    let worker = match (&shared, &membership) {
        (Some(shared), Some(membership)) => {
            Some(cluster::start::worker(shared, membership, &runner).await?)
        }
        _ => None,
    };
    let common = Common {
        store: store.clone(),
        audit: audit.clone(),
        data_dir: data_dir.clone(),
        socket: socket_path.clone(),
        logs_dir: logs_dir.clone(),
        parallel_limit: cli.parallel as usize,
        modules_dir: cli.modules_dir(),
        workspace: cli.workspace()?,
        grants: cli.allow_users.iter().copied().collect(),
        limits,
        started_at: chrono::Utc::now(),
        cluster: membership.clone(),
        relay: shared
            .clone()
            .zip(membership.clone())
            .map(|(shared, membership)| cluster::relay::Relay::new(shared, membership)),
        retention: retention.clone(),
        shutdown: shutdown.clone(),
    };
    let commit_latency = metrics::commit_latency();
    let mut standby_ctx = None;
    if let Some(membership) = &membership
        && !matches!(membership.part(), cluster::membership::Part::Leading { .. })
    {
        tracing::info!(node = membership.name(), "standing by");
        let bus = events::EventBus::default();
        // The test environments on this node's engine: recovered here, their records
        // committed by the leader.
        let (store, relay) = (shared.clone(), common.relay.clone());
        let (Some(store), Some(relay)) = (store, relay) else {
            anyhow::bail!("a standby without the shared store");
        };
        let name = membership.name().to_string();
        let own = tokio::task::spawn_blocking(move || store.test_envs_of(&name)).await??;
        let testenvs = testenv::TestEnvService::new(
            testenv_config(&cli, &common),
            testenv::keeper::Keeper::Leader(relay),
            own,
        )?;
        testenvs.recover();
        let ctx = common.context(engine::EngineHandle::detached(), bus, testenvs, true);
        let http = http_parts.as_ref().map(|(listener, tokens)| {
            let app = http_app(&cli, &ctx, tokens.clone(), commit_latency.clone());
            (listener, app)
        });
        standby_ctx = Some(ctx.clone());
        if let Some(relay) = &ctx.relay {
            relay.serve_node(ctx.clone(), shutdown.clone());
        }
        match cluster::standby::serve(ctx, membership, &listener, http).await {
            Some(term) => tracing::info!(term, "leading: loading the live state"),
            None => {
                let handover = standby_ctx.as_ref().is_some_and(|c| c.leaves_running());
                let left = cluster::worker::stop(worker, handover).await;
                let leaving = membership.clone();
                tokio::task::spawn_blocking(move || leaving.leave(left)).await?;
                if let Some(reason) = membership.stood_down() {
                    anyhow::bail!("the node stood down: {reason}");
                }
                tracing::info!("stopping (standby)");
                return Ok(());
            }
        }
    }
    let snapshot = store.load()?;
    if snapshot.migration_underway {
        anyhow::bail!(
            "the {} store holds an unfinished migration (provisioning-orchestrator migrate stopped before its copy was complete and checked): it holds only part of its source. Migrate again into an empty store, or start on the source",
            store.backend_name()
        );
    }
    tracing::info!(
        tasks = snapshot.tasks.len(),
        queued = snapshot.queue.len(),
        "state loaded"
    );
    let observe = commit_latency.clone();
    let (committer, writer) = GroupCommitter::start(
        store.clone(),
        Box::new(move |took| observe.observe(took.as_secs_f64())),
    );
    let bus = events::EventBus::default();
    // A cluster's attempts are placed on its nodes; a single daemon runs them itself.
    let (nodes, placement) = match &shared {
        Some(shared) => {
            let (nodes, placement) = cluster::placement::starting(shared)?;
            (nodes, Some(placement))
        }
        None => (
            engine::Nodes::local(cli.parallel as usize, cli.labels.clone()),
            None,
        ),
    };
    let outbox = Arc::new(tokio::sync::Notify::new());
    let parts = EngineParts {
        committer,
        store: store.clone(),
        bus: bus.clone(),
        runner,
        nodes,
        placement,
        fatal: fatal.clone(),
        expander: Arc::new(ops::workflow_submit::Expander {
            modules_dir: common.modules_dir.clone(),
            workspace: common.workspace.clone(),
            data_dir: common.data_dir.clone(),
        }),
        outbox: outbox.clone(),
    };
    let stored_envs = snapshot.test_envs.clone();
    let last_task_id = snapshot.last_task_id;
    let (engine, engine_task) = Engine::start(snapshot, parts)
        .await
        .context("recovering interrupted tasks")?;
    notify::spawn(store.clone(), engine.clone(), outbox, shutdown.clone());
    if let (Some(shared), Some(membership)) = (&shared, &membership) {
        let tick = membership.lease() / 10;
        cluster::placement::follow(shared.clone(), engine.clone(), tick, shutdown.clone());
    }
    let testenvs = match &standby_ctx {
        // A standby that now leads goes on with its service (its recovery is under way).
        Some(standby) => {
            standby.testenvs.lead(engine.clone(), stored_envs);
            standby.testenvs.clone()
        }
        None => {
            let keeper = testenv::keeper::Keeper::Engine(engine.clone());
            let testenvs =
                testenv::TestEnvService::new(testenv_config(&cli, &common), keeper, stored_envs)?;
            // Leftover scripts are stopped now; containers are recovered in the background
            // (requests that need the engine are refused until that is done).
            testenvs.recover();
            testenvs
        }
    };
    if let Some(retain) = cli.retain_audit {
        audit::retention::spawn(audit.clone(), retain, shutdown.clone());
    }
    retention::sweep::spawn(store.clone(), logs_dir.clone(), last_task_id);
    retention::spawn(
        engine.clone(),
        store.clone(),
        retention.clone(),
        audit::retention::daemon(),
        shutdown.clone(),
    );
    let ctx = common.context(engine.clone(), bus, testenvs, false);
    if let Some(relay) = &ctx.relay {
        relay.serve(ctx.clone(), shutdown.clone());
        if standby_ctx.is_none() {
            relay.serve_node(ctx.clone(), shutdown.clone());
        }
    }
    if let Some(standby) = standby_ctx {
        let _ = standby.successor.set(ctx.clone());
    }
    let http = http_parts.map(|(listener, tokens)| {
        let app = http_app(&cli, &ctx, tokens, commit_latency);
        tokio::spawn(http::serve(listener, app, ctx.clone()))
    });
    tracing::info!(socket = %socket_path.display(), data_dir = %data_dir.display(), pid = std::process::id(), "listening");
    server::serve(listener, ctx.clone()).await;
    if let Some(http) = http {
        let _ = http.await;
    }
    let stood_down = match &membership {
        Some(m) if fatal.is_cancelled() => m.stand_down_reason(),
        _ => None,
    };
    if let Some(reason) = stood_down {
        anyhow::bail!("the node stood down: {reason}");
    }
    if fatal.is_cancelled() {
        anyhow::bail!(
            "a state change could not be committed to the store; stopped without acting on it (see orchestrator.log)"
        );
    }
    // A cluster's attempts run on its nodes: the next leader follows them (this node's
    // own are stopped by its worker below, unless the stop leaves them running).
    let handover = ctx.leaves_running();
    let leave_running = membership.is_some() || (handover && !cli.no_supervisor);
    if leave_running {
        tracing::info!("stopping: running tasks are left to the supervisor");
    } else {
        tracing::info!("stopping: running tasks are stopped and requeued");
    }
    engine.shutdown(leave_running).await;
    let _ = engine_task.await;
    drop(ctx);
    drop(engine);
    if let Ok(Ok(stats)) = tokio::task::spawn_blocking(move || writer.join()).await {
        tracing::info!(
            transactions = stats.transactions,
            batches = stats.batches,
            commit_ms = stats.commit_micros / 1000,
            "store closed"
        );
    }
    let left = cluster::worker::stop(worker, handover).await;
    if let Some(membership) = membership {
        tokio::task::spawn_blocking(move || membership.leave(left)).await?;
    }
    Ok(())
}

/// What every context of the daemon holds, whatever its part in a cluster.
struct Common {
    store: Arc<dyn Store>,
    audit: Arc<audit::archive::Archive>,
    data_dir: std::path::PathBuf,
    socket: std::path::PathBuf,
    logs_dir: std::path::PathBuf,
    parallel_limit: usize,
    modules_dir: std::path::PathBuf,
    workspace: std::path::PathBuf,
    grants: std::collections::HashMap<u32, policy::Role>,
    limits: Arc<server::limits::Limits>,
    started_at: chrono::DateTime<chrono::Utc>,
    cluster: Option<Arc<cluster::Membership>>,
    relay: Option<Arc<cluster::relay::Relay>>,
    retention: Arc<retention::Policy>,
    shutdown: CancellationToken,
}

impl Common {
    /// The operations' context with `engine`, `bus` and `testenvs` (a standby's when
    /// `standby`).
    fn context(
        &self,
        engine: engine::EngineHandle,
        bus: events::EventBus,
        testenvs: Arc<testenv::TestEnvService>,
        standby: bool,
    ) -> Arc<ops::Context> {
        Arc::new(ops::Context {
            store: self.store.clone(),
            audit: self.audit.clone(),
            engine,
            bus,
            data_dir: self.data_dir.clone(),
            socket: self.socket.clone(),
            logs_dir: self.logs_dir.clone(),
            parallel_limit: self.parallel_limit,
            modules_dir: self.modules_dir.clone(),
            workspace: self.workspace.clone(),
            testenvs,
            grants: self.grants.clone(),
            limits: self.limits.clone(),
            started_at: self.started_at,
            cluster: self.cluster.clone(),
            relay: self.relay.clone(),
            standby,
            successor: std::sync::OnceLock::new(),
            retention: self.retention.clone(),
            shutdown: self.shutdown.clone(),
            leave_running: Default::default(),
        })
    }
}

/// The test environments' settings.
fn testenv_config(cli: &Cli, common: &Common) -> testenv::TestEnvConfig {
    testenv::TestEnvConfig {
        modules_dir: common.modules_dir.clone(),
        nu_binary: cli.nu_binary.clone(),
        logs_dir: common.logs_dir.clone(),
        data_dir: common.data_dir.clone(),
        max_envs: cli.max_test_envs as usize,
        default_ttl: cli.test_env_ttl,
        node: common.cluster.as_ref().map(|m| m.name().to_string()),
    }
}

/// The HTTP router over `ctx`, with its metrics and its count of the last hour.
fn http_app(
    cli: &Cli,
    ctx: &Arc<ops::Context>,
    tokens: Arc<http::auth::Tokens>,
    commit_latency: prometheus_client::metrics::histogram::Histogram,
) -> axum::Router {
    let (bus, store, testenvs) = (&ctx.bus, ctx.store.clone(), ctx.testenvs.clone());
    let activity = activity::ActivityCounter::start(bus, store.clone());
    let metrics = metrics::Metrics::start(bus, store, testenvs, commit_latency);
    let open = cli.http_auth == config::HttpAuth::None;
    http::router(ctx.clone(), tokens, metrics, activity, open)
}

/// Opens the redb store in `data_dir`. A missing file makes a new store only when the
/// data directory holds nothing of an earlier one (task logs): a lost or renamed database
/// is never silently replaced by an empty one whose ids restart at 1.
fn open_redb(data_dir: &Path, logs_dir: &Path) -> anyhow::Result<RedbStore> {
    let path = data_dir.join(STORE_FILE);
    if !path.exists() && has_entries(logs_dir)? {
        anyhow::bail!(
            "{} is missing but {} holds task logs of an earlier store; refusing to start a new store over them. Restore {} from a backup, or move the whole data directory aside to start afresh",
            path.display(),
            logs_dir.display(),
            STORE_FILE
        );
    }
    Ok(RedbStore::open(&path)?)
}

/// The lock file of a data directory whose store is not in it (with redb, the store
/// file's own lock keeps a second daemon out).
pub const DATA_DIR_LOCK: &str = "daemon.lock";

/// Takes the data directory for this daemon (a second one would share its logs, tokens and
/// supervisor), then connects to the database of `--storage-type postgres` (its URL
/// checked by `Cli::validate`); errors name it without its password. The store holds the
/// directory's lock for as long as it lives.
fn open_postgres(cli: &Cli, data_dir: &Path) -> anyhow::Result<PostgresStore> {
    let lock = files::lock_exclusive(&data_dir.join(DATA_DIR_LOCK))
        .with_context(|| format!("cannot lock {}", data_dir.display()))?
        .with_context(|| {
            format!(
                "the data directory {} is already in use by another daemon ({DATA_DIR_LOCK} is locked)",
                data_dir.display()
            )
        })?;
    let url = cli.database_url()?.context("no database URL")?;
    let store = PostgresStore::join(url.expose())
        .with_context(|| format!("cannot use the database {}", url.redacted()))?;
    Ok(store.holding(lock))
}

/// True when `dir` exists and is not empty.
fn has_entries(dir: &Path) -> anyhow::Result<bool> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => Ok(entries.next().is_some()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(anyhow::anyhow!("cannot read {}: {e}", dir.display())),
    }
}

/// Tightens what an earlier version (or a wider umask) left readable by others: the data,
/// logs and audit segment directories become 0700, the daemon's own files (its rotated logs
/// and audit segments included) 0600, each with a warning.
fn make_data_private(data_dir: &Path, logs_dir: &Path) -> anyhow::Result<()> {
    let mut paths = vec![data_dir.to_path_buf(), logs_dir.to_path_buf()];
    for name in [STORE_FILE, logging::LOG_FILE, "tokens.json", "instance-id"] {
        paths.push(data_dir.join(name));
    }
    paths.push(RedbStore::journal_path(&data_dir.join(STORE_FILE)));
    paths.extend(logging::rotated_files(data_dir));
    paths.extend(audit::segment::private_paths(data_dir));
    let changed = files::make_private(&paths)
        .with_context(|| format!("cannot make {} private", data_dir.display()))?;
    for path in changed {
        tracing::warn!(path = %path.display(), "was readable by other users; made owner-only");
    }
    Ok(())
}

/// Binds the HTTP address and reads (or creates) its tokens.
async fn bind_http(
    cli: &Cli,
    port: u16,
    data_dir: &Path,
) -> anyhow::Result<(tokio::net::TcpListener, Arc<http::auth::Tokens>)> {
    let address = std::net::SocketAddr::new(cli.bind, port);
    let listener = http::bind(address).await?;
    let tokens_path = data_dir.join("tokens.json");
    let tokens = http::auth::Tokens::load_or_create(&tokens_path)
        .with_context(|| format!("reading the HTTP tokens in {}", tokens_path.display()))?;
    tracing::info!(%address, tokens = %tokens_path.display(), "serving HTTP");
    Ok((listener, Arc::new(tokens)))
}
