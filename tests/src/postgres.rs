//! A database of its own for each test on the PostgreSQL server the test command started
//! (`scripts/postgres.sh start`, its URL in `$PROVISIONING_TEST_DATABASE_URL`), dropped when
//! the test ends, whether it passed or not. Managed through `psql`, the server's own client.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// The variable holding the test server's URL (a database to connect to for `CREATE
/// DATABASE`, such as `postgres://postgres@127.0.0.1:PORT/postgres`).
pub const SERVER_ENV: &str = "PROVISIONING_TEST_DATABASE_URL";

/// A fresh, empty database, dropped (its connections ended) when this is dropped.
pub struct TestDatabase {
    server: String,
    name: String,
}

impl TestDatabase {
    /// Creates `orch_e2e_<pid>_<n>` on the test server. Panics, saying how to start one,
    /// when `$PROVISIONING_TEST_DATABASE_URL` is unset.
    pub fn create() -> TestDatabase {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let server = std::env::var(SERVER_ENV).unwrap_or_else(|_| {
            panic!(
                "{SERVER_ENV} is not set: these tests need a PostgreSQL server. Run them through ./scripts/test.sh, or start one with `scripts/postgres.sh start DIR` and export {SERVER_ENV}=<the URL it prints>"
            )
        });
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("orch_e2e_{}_{n}", std::process::id());
        psql(&server, &format!("CREATE DATABASE {name}"));
        TestDatabase { server, name }
    }

    /// The database's URL, for `--database-url`.
    pub fn url(&self) -> String {
        self.url_with_password(None)
    }

    /// The URL with a password in its user part (the test server trusts every local
    /// connection, so any password is accepted): for tests that a password never shows.
    pub fn url_with_password(&self, password: Option<&str>) -> String {
        let (scheme, rest) = self.server.split_once("://").expect("a URL");
        let (authority, _database) = rest.split_once('/').unwrap_or((rest, ""));
        let authority = match (password, authority.split_once('@')) {
            (Some(p), Some((user, host))) => format!("{user}:{p}@{host}"),
            _ => authority.to_string(),
        };
        format!("{scheme}://{authority}/{}", self.name)
    }

    /// Runs one SQL statement in this database; returns what `psql` printed (unaligned,
    /// tuples only).
    pub fn sql(&self, statement: &str) -> String {
        psql(&self.url(), statement)
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .args(["-X", "-q", "-d", &self.server, "-c"])
            .arg(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
            .output();
    }
}

/// Runs `statement` against `url` with `psql`, panicking with its stderr when it fails.
fn psql(url: &str, statement: &str) -> String {
    let out = Command::new("psql")
        .args([
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            url,
            "-c",
            statement,
        ])
        .output()
        .expect("psql runs (the PostgreSQL client is installed by scripts/postgres.sh)");
    assert!(
        out.status.success(),
        "psql {statement:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
