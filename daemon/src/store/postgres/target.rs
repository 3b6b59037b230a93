//! The server a store connects to, as it may be named in logs and errors: its host(s),
//! port(s) and database, never the URL itself (which may carry a password). Every error the
//! backend returns goes through [`Target::redacted`], which also scrubs the URL and the
//! password out of any message a library built from them.

use std::str::FromStr;

use tokio_postgres::config::Host;

use crate::store::StoreError;

/// What replaces a secret found in a message.
const HIDDEN: &str = "[redacted]";

/// A parsed connection URL and how to name it.
pub(super) struct Target {
    /// The client configuration parsed from the URL.
    pub(super) config: tokio_postgres::Config,
    /// `host:port/database`, for messages.
    pub(super) label: String,
    /// Strings that must never appear in a message (the URL, the password).
    secrets: Vec<String>,
}

impl Target {
    /// Parses `url`; the error names neither the URL nor its password.
    pub(super) fn parse(url: &str) -> Result<Target, StoreError> {
        let mut secrets = vec![url.to_string()];
        secrets.extend(password_in(url));
        match tokio_postgres::Config::from_str(url) {
            Ok(mut config) => {
                with_timeouts(&mut config);
                if let Some(password) = config.get_password() {
                    secrets.push(String::from_utf8_lossy(password).into_owned());
                }
                secrets.retain(|s| !s.is_empty());
                let label = label_of(&config);
                // An `@` left in a host is part of a password that was not percent-encoded.
                let label = match label.contains('@') {
                    true => "(a URL whose password holds an unencoded @)".to_string(),
                    false => label,
                };
                Ok(Target {
                    label,
                    config,
                    secrets,
                })
            }
            Err(e) => {
                secrets.retain(|s| !s.is_empty());
                let message = scrub(&e.to_string(), &secrets);
                Err(StoreError::Backend(format!(
                    "the PostgreSQL URL cannot be parsed: {message}"
                )))
            }
        }
    }

    /// `error` with the secrets scrubbed out, a backend failure prefixed with the server.
    pub(super) fn redacted(&self, error: StoreError) -> StoreError {
        let clean = |s: String| scrub(&s, &self.secrets);
        match error {
            StoreError::Backend(message) => {
                StoreError::Backend(format!("postgres {}: {}", self.label, clean(message)))
            }
            StoreError::Unusable { path, problem } => StoreError::Unusable {
                path: clean(path),
                problem: clean(problem),
            },
            StoreError::Corrupt { what, error } => StoreError::Corrupt {
                what: clean(what),
                error: clean(error),
            },
            StoreError::AlreadyOpen { path } => StoreError::AlreadyOpen { path: clean(path) },
            fenced @ StoreError::Fenced { .. } => fenced,
        }
    }
}

/// How the server is named when a URL is shown: `postgres://host:port/database`, never its
/// user part, password or parameters (or a fixed phrase when it does not parse).
pub fn describe(url: &str) -> String {
    match tokio_postgres::Config::from_str(url) {
        Ok(config) if !label_of(&config).contains('@') => {
            format!("postgres://{}", label_of(&config))
        }
        _ => "a PostgreSQL URL that does not parse".to_string(),
    }
}

/// Bounds what a dead or unreachable server can cost, unless the URL sets its own: the
/// connect, and TCP keepalives that notice a server (or a network) gone silent.
fn with_timeouts(config: &mut tokio_postgres::Config) {
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(std::time::Duration::from_secs(10));
    }
    config.keepalives(true);
    config.keepalives_idle(std::time::Duration::from_secs(30));
    config.tcp_user_timeout(std::time::Duration::from_secs(60));
}

/// `host:port/database` (hosts and ports joined by commas when several are given).
fn label_of(config: &tokio_postgres::Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|host| match host {
            Host::Tcp(name) => name.clone(),
            Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    let hosts = if hosts.is_empty() {
        "localhost".to_string()
    } else {
        hosts.join(",")
    };
    let ports: Vec<String> = config.get_ports().iter().map(u16::to_string).collect();
    let port = if ports.is_empty() {
        String::new()
    } else {
        format!(":{}", ports.join(","))
    };
    let database = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("{hosts}{port}/{database}")
}

/// The password of a `scheme://user:password@host` URL, or of a `password=...` pair, found
/// without a full parse (for scrubbing the message of a URL that does not parse).
fn password_in(url: &str) -> Option<String> {
    if let Some((_, rest)) = url.split_once("://") {
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        let userinfo = authority.rsplit_once('@')?.0;
        return userinfo.split_once(':').map(|(_, p)| p.to_string());
    }
    let (_, after) = url.split_once("password=")?;
    after.split_whitespace().next().map(str::to_string)
}

/// `message` with every secret replaced.
fn scrub(message: &str, secrets: &[String]) -> String {
    // Longest first, so that the URL goes before the password inside it.
    let mut secrets: Vec<&String> = secrets.iter().collect();
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = message.to_string();
    for secret in secrets {
        out = out.replace(secret.as_str(), HIDDEN);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "postgres://orch:s3cret-pw@db.example:6543/orchestrator";

    #[test]
    fn the_label_names_host_port_and_database_only() {
        let target = Target::parse(URL).unwrap();
        assert_eq!(target.label, "db.example:6543/orchestrator");
        assert!(!target.label.contains("s3cret"));
    }

    #[test]
    fn errors_lose_the_url_and_the_password() {
        let target = Target::parse(URL).unwrap();
        let leaked = StoreError::Backend(format!("failed for {URL}, password s3cret-pw"));
        let message = target.redacted(leaked).to_string();
        assert!(!message.contains("s3cret"), "{message}");
        assert!(
            message.contains("db.example:6543/orchestrator"),
            "{message}"
        );
        let unusable = StoreError::Unusable {
            path: target.label.clone(),
            problem: "s3cret-pw".into(),
        };
        assert!(!target.redacted(unusable).to_string().contains("s3cret"));
    }

    #[test]
    fn an_unparsable_url_is_refused_without_echoing_it() {
        let bad = "postgres://orch:s3cret-pw@db.example:notaport/orchestrator";
        let message = Target::parse(bad).err().unwrap().to_string();
        assert!(!message.contains("s3cret"), "{message}");
        assert!(message.contains("cannot be parsed"), "{message}");
        let pairs = "host=db.example password=s3cret-pw port=x";
        let message = Target::parse(pairs).err().unwrap().to_string();
        assert!(!message.contains("s3cret"), "{message}");
    }

    #[test]
    fn a_key_value_string_and_a_url_without_database_are_named_too() {
        let target = Target::parse("host=/run/pg user=orch password=pw").unwrap();
        assert_eq!(target.label, "/run/pg/orch");
        let target = Target::parse("postgres://orch@127.0.0.1").unwrap();
        assert_eq!(target.label, "127.0.0.1:5432/orch");
    }
}
