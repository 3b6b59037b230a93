//! The provisioning orchestrator daemon.
//!
//! Layout:
//! - [`config`]: command-line flags.
//! - [`audit`]: the hash-chained audit log of every change request.
//! - [`socket`]: binding the owner-only Unix socket, with stale-socket detection.
//! - [`server`]: the accept loop, the handshake, and one handler per request kind
//!   (`server/handlers/`).
//! - [`engine`]: the priority queue, parallel limits, retries with backoff, timeouts,
//!   cancel, hard and soft dependencies, workflows with rollback, and crash recovery; one
//!   task owns all of it.
//! - [`extensions`]: providers, taskservs and cluster definitions read from manifests.
//! - [`workflows`]: workflow requests expanded into a checked DAG of steps, and plans.
//! - [`testenv`]: test environments in containers (Docker API), with their recovery.
//! - [`runner`]: runs one attempt of a task as a process group, with its log and progress.
//! - [`store`]: the [`store::Store`] trait, its redb backend, and the group committer.
//! - [`events`]: the one event bus that every watcher reads.
//! - [`orphans`]: stopping processes that a crashed daemon left running.
//! - [`http`]: the REST shim (`--port`) over the same handlers, with tokens and roles.
//! - [`metrics`]: Prometheus metrics.
//! - [`files`]: small files written atomically beside the database.
//! - [`shutdown`] and [`logging`]: signals and the daemon's own log.
//!
//! The rule everything follows: a state change is committed to the store before it is
//! acted on (a process started, a client answered, a dependant released).

pub mod audit;
pub mod config;
pub mod engine;
pub mod events;
pub mod extensions;
pub mod files;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod orphans;
pub mod runner;
pub mod server;
pub mod shutdown;
pub mod socket;
pub mod store;
pub mod testenv;
pub mod workflows;

use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use config::{Cli, StorageType};
use engine::{Engine, EngineParts};
use runner::{Runner, RunnerConfig};
use store::{GroupCommitter, RedbStore, Store};

/// Runs the daemon until it is told to stop.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let data_dir = cli.data_dir();
    create_private_dir(&data_dir)?;
    let data_dir = data_dir.canonicalize()?;
    let logs_dir = data_dir.join("logs");
    create_private_dir(&logs_dir)?;
    let _log_guard = logging::init(&data_dir, &cli.log, cli.quiet)?;
    let socket_path = cli.socket();
    let (listener, _socket_file) = socket::bind(&socket_path)?;
    if !cli.allow_users.is_empty() {
        // Others may connect; each connection is still checked by its peer uid.
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&socket_path, std::fs::Permissions::from_mode(0o666))?;
        tracing::info!(users = ?cli.allow_users, "other users allowed on the socket");
    }
    let store: Arc<dyn Store> = match cli.storage_type {
        StorageType::Redb => Arc::new(RedbStore::open(&data_dir.join("orchestrator.redb"))?),
    };
    let snapshot = store.load()?;
    tracing::info!(
        tasks = snapshot.tasks.len(),
        queued = snapshot.queue.len(),
        "state loaded"
    );
    let commit_latency = Arc::new(metrics::Histogram::new(metrics::COMMIT_BOUNDS));
    let (committer, writer) = GroupCommitter::start(store.clone(), commit_latency.clone());
    let shutdown = CancellationToken::new();
    shutdown::cancel_on_signals(shutdown.clone())?;
    // Cancelled when a state change cannot be committed: the daemon stops at once,
    // acting on nothing more (the next start recovers from the last durable state).
    let fatal = CancellationToken::new();
    let stop_serving = shutdown.clone();
    let on_fatal = fatal.clone();
    tokio::spawn(async move {
        on_fatal.cancelled().await;
        stop_serving.cancel();
    });
    let bus = events::EventBus::default();
    let runner = Runner::new(RunnerConfig {
        nu_binary: cli.nu_binary.clone(),
        logs_dir: logs_dir.clone(),
        data_dir: data_dir.clone(),
        max_log_bytes: cli.max_log_bytes,
    })
    .context("preparing the directory of task parameters")?;
    let parts = EngineParts {
        committer,
        bus: bus.clone(),
        runner,
        parallel_limit: cli.parallel as usize,
        fatal: fatal.clone(),
    };
    let stored_envs = snapshot.test_envs.clone();
    let (engine, engine_task) = Engine::start(snapshot, parts)
        .await
        .context("recovering interrupted tasks")?;
    let modules_dir = cli.modules_dir();
    let testenvs = testenv::TestEnvService::new(
        testenv::TestEnvConfig {
            modules_dir: modules_dir.clone(),
            nu_binary: cli.nu_binary.clone(),
            logs_dir: logs_dir.clone(),
            data_dir: data_dir.clone(),
            max_envs: cli.max_test_envs as usize,
            default_ttl: cli.test_env_ttl,
        },
        engine.clone(),
        stored_envs,
    )?;
    // Before any request: interrupted environments and leftovers are dealt with first.
    testenvs.recover().await;
    let ctx = Arc::new(server::Context {
        store,
        engine: engine.clone(),
        bus,
        data_dir: data_dir.clone(),
        socket: socket_path.clone(),
        logs_dir,
        parallel_limit: cli.parallel as usize,
        modules_dir,
        workspace: cli.workspace()?,
        testenvs,
        grants: cli.allow_users.iter().copied().collect(),
        started_at: chrono::Utc::now(),
        shutdown: shutdown.clone(),
    });
    let http = match cli.port {
        Some(port) => {
            let tokens = Arc::new(
                http::auth::Tokens::load_or_create(&data_dir.join("tokens.json"))
                    .context("reading the HTTP tokens")?,
            );
            let metrics = metrics::Metrics::start(&ctx.bus, ctx.store.clone(), commit_latency);
            let address = std::net::SocketAddr::new(cli.bind, port);
            let open = cli.http_auth == config::HttpAuth::None;
            if open && !cli.bind.is_loopback() {
                anyhow::bail!(
                    "--http-auth none is only allowed on a loopback address, not {}",
                    cli.bind
                );
            }
            let listener = http::bind(address).await?;
            tracing::info!(%address, tokens = %data_dir.join("tokens.json").display(), "serving HTTP");
            let app = http::router(ctx.clone(), tokens, metrics, open);
            Some(tokio::spawn(http::serve(listener, app, ctx.clone())))
        }
        None => None,
    };
    tracing::info!(socket = %socket_path.display(), data_dir = %data_dir.display(), pid = std::process::id(), "listening");
    server::serve(listener, ctx.clone()).await;
    if let Some(http) = http {
        let _ = http.await;
    }
    if fatal.is_cancelled() {
        anyhow::bail!(
            "a state change could not be committed to the store; stopped without acting on it (see orchestrator.log)"
        );
    }
    tracing::info!("stopping: running tasks are stopped and requeued");
    engine.shutdown().await;
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
    Ok(())
}

fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))
}
