//! `--retain-audit`: the daemon compacts its own audit log, archiving the entries older
//! than the retention, at start and then every tenth of it (between a second and a day).
//! Each run that archives something is recorded by its checkpoint entry (actor: the
//! daemon); a run with nothing to archive writes nothing.

use std::sync::Arc;
use std::time::Duration;

use orch_protocol::{Actor, AuditCut};
use tokio_util::sync::CancellationToken;

use super::archive::Archive;

/// How often the retention is applied, for a retention of `retain`.
pub fn period(retain: Duration) -> Duration {
    (retain / 10).clamp(Duration::from_secs(1), Duration::from_secs(24 * 3600))
}

/// The actor of the daemon's own compactions and removals.
pub fn daemon() -> Actor {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    Actor {
        uid,
        interface: "daemon".into(),
    }
}

/// Applies the retention until `stop` is cancelled.
pub fn spawn(archive: Arc<Archive>, retain: Duration, stop: CancellationToken) {
    let every = period(retain);
    let retention = humantime::format_duration(retain).to_string();
    tokio::spawn(async move {
        loop {
            let cutoff = chrono::Utc::now()
                - chrono::Duration::from_std(retain).unwrap_or(chrono::Duration::MAX);
            let (archive, retention) = (archive.clone(), retention.clone());
            let ran = tokio::task::spawn_blocking(move || {
                archive.compact(AuditCut::Time(cutoff), daemon(), Some(&retention))
            })
            .await;
            match ran {
                Ok(Ok(Some(segment))) => tracing::info!(
                    first = segment.seal.first,
                    last = segment.seal.last,
                    file = %segment.seal.file,
                    "audit entries past the retention archived"
                ),
                Ok(Ok(None)) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "the audit retention could not run"),
                Err(e) => tracing::warn!(error = %e, "the audit retention stopped"),
            }
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = stop.cancelled() => return,
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_period_is_a_tenth_of_the_retention_within_bounds() {
        assert_eq!(period(Duration::from_secs(100)), Duration::from_secs(10));
        assert_eq!(period(Duration::from_millis(500)), Duration::from_secs(1));
        assert_eq!(
            period(Duration::from_secs(365 * 24 * 3600)),
            Duration::from_secs(24 * 3600)
        );
    }
}
