//! The retention policy from the daemon's flags (`--retain-finished`, `--retain-label`,
//! `--retain-events`), their parsing, and the rule each run applies.

use std::collections::BTreeMap;
use std::time::Duration;

use orch_protocol::{MAX_CLEAN_BATCH, RetentionReport};

use crate::engine::{Keep, Rule};

/// What the daemon removes by itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// How long finished tasks and workflows (and their logs) are kept.
    pub finished: Keep,
    /// Per-label retentions of finished tasks.
    pub labels: BTreeMap<String, Keep>,
    /// How long events are kept.
    pub events: Keep,
}

impl Policy {
    /// The policy of the flags; labels given twice keep the last value.
    pub fn new(finished: Option<Keep>, labels: &[(String, Keep)], events: Option<Keep>) -> Policy {
        Policy {
            finished: finished.unwrap_or(Keep::Forever),
            labels: labels.iter().cloned().collect(),
            events: events.unwrap_or(Keep::Forever),
        }
    }

    /// True when it never removes anything.
    pub fn is_idle(&self) -> bool {
        self.finished == Keep::Forever
            && self.events == Keep::Forever
            && self.labels.values().all(|k| *k == Keep::Forever)
    }

    /// The rule of one removal of finished tasks and workflows.
    pub fn rule(&self) -> Rule {
        Rule {
            keep: self.finished,
            labels: self.labels.clone(),
            only_label: None,
            status: Vec::new(),
            workflows: true,
            limit: MAX_CLEAN_BATCH,
            retention: true,
        }
    }

    /// How often the policy is applied: a tenth of its shortest retention, between a
    /// second and an hour.
    pub fn period(&self) -> Duration {
        let shortest = std::iter::once(self.finished)
            .chain(self.labels.values().copied())
            .chain(std::iter::once(self.events))
            .filter_map(|k| match k {
                Keep::For(age) => Some(age),
                Keep::Forever => None,
            })
            .min()
            .unwrap_or(Duration::from_secs(3600));
        (shortest / 10).clamp(Duration::from_secs(1), Duration::from_secs(3600))
    }

    /// The policy as `orch health` shows it, with how far the event log was trimmed.
    pub fn report(&self, events_removed_through: u64) -> RetentionReport {
        RetentionReport {
            finished: self.finished.to_string(),
            labels: self
                .labels
                .iter()
                .map(|(label, keep)| (label.clone(), keep.to_string()))
                .collect(),
            events: self.events.to_string(),
            events_removed_through,
        }
    }
}

/// Parses a retention: `never`, or a duration such as `30d`, `12h`, `90days`.
pub fn parse_keep(text: &str) -> Result<Keep, String> {
    if text == "never" {
        return Ok(Keep::Forever);
    }
    let age = humantime::parse_duration(text)
        .map_err(|e| format!("expected a duration such as 30d or 12h, or `never` ({e})"))?;
    if age.is_zero() {
        return Err("a retention must be longer than zero (use `orch clean` to remove now)".into());
    }
    Ok(Keep::For(age))
}

/// Parses a per-label retention: `LABEL=RETENTION`, such as `servers=90d` or `ci=never`.
pub fn parse_label(text: &str) -> Result<(String, Keep), String> {
    let (label, keep) = text
        .split_once('=')
        .ok_or("expected LABEL=RETENTION, such as servers=90d or ci=never")?;
    if label.is_empty() {
        return Err("the label before `=` is empty".into());
    }
    Ok((label.to_string(), parse_keep(keep)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retentions_parse_as_durations_or_never_and_bad_ones_say_why() {
        assert_eq!(
            parse_keep("30d"),
            Ok(Keep::For(Duration::from_secs(30 * 86400)))
        );
        assert_eq!(parse_keep("never"), Ok(Keep::Forever));
        assert!(parse_keep("soon").unwrap_err().contains("30d"));
        assert!(parse_keep("0s").unwrap_err().contains("longer than zero"));
        assert_eq!(
            parse_label("servers=90d"),
            Ok(("servers".into(), Keep::For(Duration::from_secs(90 * 86400))))
        );
        assert_eq!(parse_label("ci=never"), Ok(("ci".into(), Keep::Forever)));
        assert!(
            parse_label("servers")
                .unwrap_err()
                .contains("LABEL=RETENTION")
        );
        assert!(parse_label("=1d").unwrap_err().contains("empty"));
    }

    #[test]
    fn the_period_is_a_tenth_of_the_shortest_retention_within_bounds() {
        let hours = |h: u64| Some(Keep::For(Duration::from_secs(h * 3600)));
        let label = [("ci".to_string(), Keep::For(Duration::from_secs(100)))];
        assert_eq!(
            Policy::new(hours(1), &label, None).period(),
            Duration::from_secs(10)
        );
        assert_eq!(
            Policy::new(hours(24 * 30), &[], None).period(),
            Duration::from_secs(3600)
        );
        assert!(Policy::new(None, &[], None).is_idle());
        let report = Policy::new(hours(2), &label, None).report(7);
        assert_eq!(
            (report.finished.as_str(), report.events.as_str()),
            ("2h", "never")
        );
        assert_eq!(report.labels["ci"], "1m 40s");
    }
}
