//! The PostgreSQL database's URL: where it comes from (`--database-url`, a file, or
//! `$PROVISIONING_ORCHESTRATOR_DATABASE_URL`) and how it is shown. It may carry a password,
//! so it is a [`DatabaseUrl`], whose `Debug` and [`DatabaseUrl::redacted`] hide it: the
//! whole URL is only handed to the database client.

use std::path::Path;

/// The environment variable the URL is read from when no flag gives it.
pub const DATABASE_URL_ENV: &str = "PROVISIONING_ORCHESTRATOR_DATABASE_URL";

/// A flag's value that may hold a password, taken as given (clap would repeat a refused
/// value in its error) and checked by [`resolve`]; `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretArg(String);

impl SecretArg {
    /// Takes the value as it is (clap's parser: never fails).
    pub fn given(text: &str) -> Result<SecretArg, std::convert::Infallible> {
        Ok(SecretArg(text.to_string()))
    }
}

impl std::fmt::Debug for SecretArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// A `postgres://` (or `postgresql://`) URL, its password hidden wherever it is printed.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    /// Checks that `text` is a PostgreSQL URL (clap's parser for `--database-url`). The
    /// error never repeats the text, which may hold a password.
    pub fn parse(text: &str) -> Result<DatabaseUrl, String> {
        let text = text.trim();
        let rest = text
            .strip_prefix("postgres://")
            .or_else(|| text.strip_prefix("postgresql://"))
            .ok_or("not a PostgreSQL URL: it must start with postgres:// or postgresql://")?;
        if rest.is_empty() {
            return Err("the URL names no server: postgres://USER@HOST:PORT/DATABASE".into());
        }
        if text.chars().any(char::is_control) {
            return Err("the URL holds a control character".into());
        }
        Ok(DatabaseUrl(text.to_string()))
    }

    /// The whole URL, password included: only for the database client.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// How the database is named wherever the URL would be shown: its scheme, host, port
    /// and database only (no user, password or parameters, however they are written).
    pub fn redacted(&self) -> String {
        crate::store::postgres::describe(&self.0)
    }
}

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// Why no usable URL was found.
#[derive(Debug, thiserror::Error)]
pub enum DatabaseUrlError {
    /// `--storage-type postgres` without a URL.
    #[error(
        "--storage-type postgres needs the database: --database-url postgres://USER@HOST:PORT/DATABASE, --database-url-file FILE, or ${DATABASE_URL_ENV}"
    )]
    Missing,
    /// The URL was given twice.
    #[error("give the database URL once: --database-url or --database-url-file, not both")]
    Twice,
    /// A URL flag with the embedded store.
    #[error("{0} is only for --storage-type postgres (the store is the embedded redb file)")]
    NotPostgres(&'static str),
    /// The URL file cannot be read.
    #[error("--database-url-file {path}: {error}")]
    File {
        /// The file.
        path: String,
        /// Why it cannot be used.
        error: String,
    },
    /// The URL does not parse.
    #[error("{source_name}: {error}")]
    Invalid {
        /// Where it came from: the flag, the file or the variable.
        source_name: String,
        /// What is wrong (never the URL itself).
        error: String,
    },
}

/// The URL to use: `--database-url`, else the first line of `--database-url-file`, else
/// `$PROVISIONING_ORCHESTRATOR_DATABASE_URL` (`env`), or none when `postgres` is false (the
/// variable is then ignored, the flags refused).
pub fn resolve(
    postgres: bool,
    flag: Option<&SecretArg>,
    file: Option<&Path>,
    env: Option<String>,
) -> Result<Option<DatabaseUrl>, DatabaseUrlError> {
    if !postgres {
        return match (flag, file) {
            (Some(_), _) => Err(DatabaseUrlError::NotPostgres("--database-url")),
            (_, Some(_)) => Err(DatabaseUrlError::NotPostgres("--database-url-file")),
            (None, None) => Ok(None),
        };
    }
    match (flag, file) {
        (Some(_), Some(_)) => Err(DatabaseUrlError::Twice),
        (Some(SecretArg(text)), None) => {
            DatabaseUrl::parse(text)
                .map(Some)
                .map_err(|error| DatabaseUrlError::Invalid {
                    source_name: "--database-url".into(),
                    error,
                })
        }
        (None, Some(path)) => read_file(path).map(Some),
        (None, None) => {
            let text = env.filter(|t| !t.trim().is_empty());
            let text = text.ok_or(DatabaseUrlError::Missing)?;
            DatabaseUrl::parse(&text)
                .map(Some)
                .map_err(|error| DatabaseUrlError::Invalid {
                    source_name: format!("${DATABASE_URL_ENV}"),
                    error,
                })
        }
    }
}

/// The most of a URL file read: a URL is short, and `/dev/zero` must not fill memory.
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// The URL on the first line of `path`, a regular file of at most [`MAX_FILE_BYTES`].
fn read_file(path: &Path) -> Result<DatabaseUrl, DatabaseUrlError> {
    use std::io::Read as _;
    let file_error = |error: String| DatabaseUrlError::File {
        path: path.display().to_string(),
        error,
    };
    let file = std::fs::File::open(path).map_err(|e| file_error(e.to_string()))?;
    let meta = file.metadata().map_err(|e| file_error(e.to_string()))?;
    if !meta.is_file() {
        return Err(file_error("not a regular file".into()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| file_error(e.to_string()))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(file_error(format!(
            "larger than {} KiB: it must hold the URL on its first line",
            MAX_FILE_BYTES / 1024
        )));
    }
    let text = String::from_utf8(bytes).map_err(|_| file_error("not UTF-8 text".into()))?;
    let line = text.lines().next().unwrap_or("").trim();
    if line.is_empty() {
        return Err(file_error(
            "it is empty: it must hold the URL on its first line".into(),
        ));
    }
    DatabaseUrl::parse(line).map_err(|error| DatabaseUrlError::Invalid {
        source_name: format!("--database-url-file {}", path.display()),
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> DatabaseUrl {
        DatabaseUrl::parse(text).unwrap()
    }

    #[test]
    fn passwords_are_hidden_wherever_the_url_is_shown() {
        let cases = [
            (
                "postgres://orch:s3cret@db:5432/orch",
                "postgres://db:5432/orch",
            ),
            ("postgresql://orch@db/orch", "postgres://db:5432/orch"),
            (
                "postgres://db/orch?password=s3cret&sslmode=disable",
                "postgres://db:5432/orch",
            ),
            (
                "postgres://db/orch?pass%77ord=s3cret",
                "postgres://db:5432/orch",
            ),
            ("postgres://u:s3/cret@db/x", "postgres://db:5432/x"),
            ("postgres://u:s3?cret@db/x", "postgres://db:5432/x"),
            (
                "postgres://u:s3@cret@db/x",
                "a PostgreSQL URL that does not parse",
            ),
        ];
        for (given, shown) in cases {
            assert_eq!(url(given).redacted(), shown, "{given}");
            assert_eq!(format!("{:?}", url(given)), shown);
        }
        let unparsable = url("postgres://u:s3cret@[::1/x");
        assert!(!unparsable.redacted().contains("s3cret"));
    }

    #[test]
    fn what_is_not_a_postgres_url_is_refused_without_repeating_it() {
        for bad in [
            "mysql://u:s3cret@h/d",
            "s3cret",
            "postgres://",
            "postgres://h/\u{7}",
        ] {
            let error = DatabaseUrl::parse(bad).unwrap_err();
            assert!(!error.contains("s3cret"), "{error}");
        }
    }

    #[test]
    fn the_flag_wins_then_the_file_then_the_variable() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("url");
        std::fs::write(&file, "postgres://from-file/db\n").unwrap();
        let flag = SecretArg("postgres://from-flag/db".into());
        let env = || Some("postgres://from-env/db".to_string());
        let got = resolve(true, Some(&flag), None, env()).unwrap().unwrap();
        assert_eq!(got.expose(), "postgres://from-flag/db");
        let bad = SecretArg("mysql://u:s3cret@h/d".into());
        let error = resolve(true, Some(&bad), None, None)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("--database-url: not a PostgreSQL URL"),
            "{error}"
        );
        assert!(!error.contains("s3cret") && !format!("{bad:?}").contains("s3cret"));
        let got = resolve(true, None, Some(&file), env()).unwrap().unwrap();
        assert_eq!(got.expose(), "postgres://from-file/db");
        let got = resolve(true, None, None, env()).unwrap().unwrap();
        assert_eq!(got.expose(), "postgres://from-env/db");
        assert!(matches!(
            resolve(true, Some(&flag), Some(&file), None),
            Err(DatabaseUrlError::Twice)
        ));
        assert!(matches!(
            resolve(true, None, None, None),
            Err(DatabaseUrlError::Missing)
        ));
    }

    #[test]
    fn the_embedded_store_ignores_the_variable_and_refuses_the_flags() {
        let flag = SecretArg("postgres://h/db".into());
        assert!(
            resolve(false, None, None, Some("postgres://h/db".into()))
                .unwrap()
                .is_none()
        );
        assert!(matches!(
            resolve(false, Some(&flag), None, None),
            Err(DatabaseUrlError::NotPostgres("--database-url"))
        ));
        assert!(matches!(
            resolve(false, None, Some(Path::new("/x")), None),
            Err(DatabaseUrlError::NotPostgres("--database-url-file"))
        ));
    }

    #[test]
    fn a_huge_or_special_file_is_refused_without_reading_it_all() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; 100 * 1024]).unwrap();
        let error = resolve(true, None, Some(&big), None)
            .unwrap_err()
            .to_string();
        assert!(error.contains("larger than 64 KiB"), "{error}");
        let error = resolve(true, None, Some(Path::new("/dev/zero")), None).unwrap_err();
        assert!(error.to_string().contains("not a regular file"), "{error}");
        let error = resolve(true, None, Some(dir.path()), None).unwrap_err();
        assert!(error.to_string().contains("not a regular file"), "{error}");
    }

    #[test]
    fn an_empty_or_missing_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let error = resolve(true, None, Some(&empty), None)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("empty") && error.contains("empty"),
            "{error}"
        );
        let missing = dir.path().join("missing");
        let error = resolve(true, None, Some(&missing), None)
            .unwrap_err()
            .to_string();
        assert!(error.contains("missing"), "{error}");
    }
}
