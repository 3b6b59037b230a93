//! One side of a migration: a data directory (its redb file) or a PostgreSQL database,
//! told apart from the text given, and opened as a source (it must hold a store) or a
//! target (created when missing).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::MigrateError;
use crate::config::DatabaseUrl;
use crate::store::{PostgresStore, RedbStore, Store};

/// One side of a migration.
#[derive(Debug, Clone)]
pub enum Place {
    /// A data directory, whose store is its redb file.
    Redb(PathBuf),
    /// A PostgreSQL database.
    Postgres(DatabaseUrl),
}

impl Place {
    /// A `postgres://` or `postgresql://` URL, else a data directory. What looks like
    /// another URL or a connection string is refused (it would otherwise become a
    /// directory named after it, password included); the error never repeats the text.
    pub fn parse(side: &str, text: &str) -> Result<Place, MigrateError> {
        let refused = |problem: &str| MigrateError::Place(format!("{side}: {problem}"));
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return DatabaseUrl::parse(text)
                .map(Place::Postgres)
                .map_err(|e| refused(&e));
        }
        let scheme = text.split_once(':').map(|(s, _)| s).filter(|s| {
            s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
        });
        if scheme.is_some() || text.contains('@') {
            return Err(refused(
                "this looks like a URL but not a postgres:// one: give postgres://USER@HOST:PORT/DB, or a data directory",
            ));
        }
        if text.contains('=') && text.contains(char::is_whitespace) {
            return Err(refused(
                "connection strings (key=value) are not taken: give postgres://USER@HOST:PORT/DB, or a data directory",
            ));
        }
        Ok(Place::Redb(PathBuf::from(text)))
    }

    /// Whether `self` and `other` name the same store (the same data directory, or the
    /// same database on the same server).
    pub(super) fn same_as(&self, other: &Place) -> bool {
        match (self, other) {
            (Place::Redb(a), Place::Redb(b)) => match (a.canonicalize(), b.canonicalize()) {
                (Ok(a), Ok(b)) => a == b,
                _ => a == b,
            },
            (Place::Postgres(a), Place::Postgres(b)) => a.redacted() == b.redacted(),
            _ => false,
        }
    }

    /// How this side is named in messages (a URL without its password).
    pub fn describe(&self) -> String {
        match self {
            Place::Redb(dir) => dir.join(crate::STORE_FILE).display().to_string(),
            Place::Postgres(url) => url.redacted(),
        }
    }

    /// Opens the store: an existing one for the source, created if missing for the target.
    pub(super) fn open(&self, create: bool) -> Result<Arc<dyn Store>, MigrateError> {
        let side = self.describe();
        let failed = MigrateError::on(&side);
        match self {
            Place::Redb(dir) => {
                let path = dir.join(crate::STORE_FILE);
                if !create && !path.is_file() {
                    return Err(MigrateError::Place(format!(
                        "{}: no store there (a data directory holds {})",
                        path.display(),
                        crate::STORE_FILE
                    )));
                }
                if create {
                    create_target_dir(dir)?;
                }
                Ok(Arc::new(RedbStore::open(&path).map_err(failed)?))
            }
            Place::Postgres(url) if create => Ok(Arc::new(
                PostgresStore::connect(url.expose()).map_err(failed)?,
            )),
            Place::Postgres(url) => Ok(Arc::new(
                PostgresStore::open_existing(url.expose()).map_err(failed)?,
            )),
        }
    }
}

/// Creates the target's data directory (mode 0700) when missing: its parent must exist,
/// so that a mistyped path does not become a tree of directories.
fn create_target_dir(dir: &Path) -> Result<(), MigrateError> {
    if dir.is_dir() {
        return Ok(());
    }
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
    if parent.is_some_and(|p| !p.is_dir()) {
        return Err(MigrateError::Place(format!(
            "--to {}: its parent directory does not exist (only the data directory itself is created)",
            dir.display()
        )));
    }
    crate::files::create_private_dir(dir)
        .map_err(|e| MigrateError::Place(format!("cannot create {}: {e}", dir.display())))
}
