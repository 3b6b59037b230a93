//! From the synchronous [`crate::store::Store`] calls to the asynchronous client: the
//! store's own one-thread tokio runtime drives the connections, and each call spawns its
//! queries there and waits for the answer on a std channel (so it works from a tokio
//! worker thread of the daemon as from any other thread, where blocking on a runtime would
//! panic). Connections keep their prepared statements, so a statement is parsed once per
//! connection.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Row, Statement};

use super::target::Target;
use crate::store::StoreError;

/// How long a call waits for the server before it fails (a server that stopped
/// answering must not hold a daemon's thread, or its commits, for ever).
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A client error as a backend failure, with the server's own message, code and detail
/// when the server sent one (redacted on the way out).
pub(super) fn pg(e: tokio_postgres::Error) -> StoreError {
    match e.as_db_error() {
        Some(db) => {
            let detail = db.detail().map(|d| format!(" ({d})")).unwrap_or_default();
            StoreError::Backend(format!(
                "{} {}: {}{detail}",
                db.severity(),
                db.code().code(),
                db.message()
            ))
        }
        None => StoreError::Backend(e.to_string()),
    }
}

/// The runtime the connections run on, and the server they go to.
pub(super) struct Bridge {
    runtime: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
    pub(super) target: Arc<Target>,
}

impl Bridge {
    /// Starts the runtime (one worker thread).
    pub(super) fn new(target: Target) -> Result<Bridge, StoreError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("postgres-store")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Backend(format!("cannot start the store's runtime: {e}")))?;
        Ok(Bridge {
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
            target: Arc::new(target),
        })
    }

    /// Runs `work` on the store's runtime and waits for its result (redacted).
    pub(super) fn run<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.handle.spawn(async move {
            // The caller is waiting on `rx`; it cannot have gone.
            let _ = tx.send(work.await);
        });
        let result = rx.recv_timeout(CALL_TIMEOUT).unwrap_or_else(|e| {
            Err(StoreError::Backend(match e {
                std::sync::mpsc::RecvTimeoutError::Timeout => format!(
                    "the server did not answer within {}s",
                    CALL_TIMEOUT.as_secs()
                ),
                std::sync::mpsc::RecvTimeoutError::Disconnected => {
                    "the store's runtime stopped before answering".into()
                }
            }))
        });
        result.map_err(|e| self.target.redacted(e))
    }

    /// Opens a new connection (its driver runs on the store's runtime until the client is
    /// dropped).
    pub(super) fn connect(&self) -> Result<Arc<Conn>, StoreError> {
        let target = self.target.clone();
        self.run(async move {
            let (client, connection) = target.config.connect(NoTls).await.map_err(pg)?;
            let label = target.label.clone();
            tokio::spawn(async move {
                if let Err(error) = connection.await {
                    let error = target.redacted(pg(error));
                    tracing::warn!(server = %label, %error, "store connection closed");
                }
            });
            Ok(Arc::new(Conn {
                client,
                statements: Mutex::new(HashMap::new()),
            }))
        })
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // Without waiting: the store may be dropped on one of the daemon's runtime threads,
        // where a blocking shutdown would panic.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// One connection and the statements prepared on it.
pub(super) struct Conn {
    client: Client,
    statements: Mutex<HashMap<String, Statement>>,
}

impl Conn {
    /// True once the connection is closed (the server went away or hung up).
    pub(super) fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// The prepared statement for `sql` (prepared on first use).
    async fn statement(&self, sql: &str) -> Result<Statement, StoreError> {
        let cached = self
            .statements
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(sql)
            .cloned();
        if let Some(statement) = cached {
            return Ok(statement);
        }
        let statement = self.client.prepare(sql).await.map_err(pg)?;
        self.statements
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(sql.to_string(), statement.clone());
        Ok(statement)
    }

    /// The rows `sql` returns.
    pub(super) async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        let statement = self.statement(sql).await?;
        self.client.query(&statement, params).await.map_err(pg)
    }

    /// The one row `sql` may return.
    pub(super) async fn query_opt(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, StoreError> {
        let statement = self.statement(sql).await?;
        self.client.query_opt(&statement, params).await.map_err(pg)
    }

    /// Runs `sql`; returns how many rows it changed.
    pub(super) async fn execute(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        let statement = self.statement(sql).await?;
        self.client.execute(&statement, params).await.map_err(pg)
    }

    /// Runs the statements in order, sent together: they are prepared first (those not
    /// prepared yet, together), then each is sent as it is first polled, which
    /// `try_join_all` does in order; the server runs them in the order received.
    pub(super) async fn pipeline(
        &self,
        steps: &[(String, Vec<&(dyn ToSql + Sync)>)],
    ) -> Result<(), StoreError> {
        let statements =
            futures_util::future::try_join_all(steps.iter().map(|(sql, _)| self.statement(sql)))
                .await?;
        let runs = statements
            .iter()
            .zip(steps)
            .map(|(statement, (_, params))| self.client.execute(statement, params));
        futures_util::future::try_join_all(runs)
            .await
            .map(drop)
            .map_err(pg)
    }

    /// Runs statements without parameters (transaction control, DDL).
    pub(super) async fn batch(&self, sql: &str) -> Result<(), StoreError> {
        self.client.batch_execute(sql).await.map_err(pg)
    }

    /// Runs `work` in one transaction: committed when it succeeds, rolled back when it
    /// fails (its error is returned).
    pub(super) async fn transaction<T, F>(&self, begin: &str, work: F) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, StoreError>>,
    {
        self.batch(begin).await?;
        match work.await {
            Ok(value) => {
                self.batch("COMMIT").await?;
                Ok(value)
            }
            Err(e) => {
                // The connection may be gone, which rolls the transaction back as well.
                let _ = self.batch("ROLLBACK").await;
                Err(e)
            }
        }
    }
}
