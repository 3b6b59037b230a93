//! The times of a schedule: its cron pattern (croner: 5 fields, or 6 with seconds first;
//! croner also reads a 7th, the year, and nicknames such as `@daily`) read in its IANA
//! time zone (chrono-tz), as instants. Around DST changes, croner's rules: a fixed local
//! time skipped by the change runs once after the gap (an interval pattern skips the
//! gap's times); a local time repeated runs once, at its first instant.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;
use orch_protocol::{ErrorKind, ErrorReply, ScheduleSpec, check_group_name};

/// The longest cron pattern accepted.
const MAX_PATTERN: usize = 256;

/// The longest time zone name accepted.
const MAX_ZONE: usize = 64;

/// The most local times a search steps through a repeated period (a pattern of every
/// second has 3600 in a repeated hour, 7200 in Antarctica/Troll's two).
const MAX_REPEATED: usize = 8000;

/// A schedule's pattern and time zone, parsed.
#[derive(Debug, Clone)]
pub struct Times {
    cron: Cron,
    tz: Tz,
}

impl Times {
    /// The times of `spec`; the error names the field at fault (`name`, `cron` or
    /// `timezone`).
    pub fn of(spec: &ScheduleSpec) -> Result<Times, ErrorReply> {
        check_group_name(&spec.name)
            .map_err(|why| bad("name", why.replace("group name", "schedule name")))?;
        if spec.cron.len() > MAX_PATTERN {
            return Err(bad(
                "cron",
                format!(
                    "the pattern has {} characters; at most {MAX_PATTERN}",
                    spec.cron.len()
                ),
            ));
        }
        let cron: Cron = spec.cron.parse().map_err(|e: croner::errors::CronError| {
            bad(
                "cron",
                format!(
                    "{:?} is not a cron pattern ({e}): give 5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first",
                    spec.cron
                ),
            )
        })?;
        if spec.timezone_name().len() > MAX_ZONE {
            return Err(bad(
                "timezone",
                format!("a time zone name has at most {MAX_ZONE} characters"),
            ));
        }
        let tz: Tz = spec.timezone_name().parse().map_err(|_| {
            bad(
                "timezone",
                format!(
                    "{:?} is not an IANA time zone (such as UTC, Europe/Berlin, America/New_York)",
                    spec.timezone_name()
                ),
            )
        })?;
        Ok(Times { cron, tz })
    }

    /// The first time strictly after `after` (none when the pattern has no more).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut from = after.with_timezone(&self.tz);
        // In the second pass of a repeated local hour, the next local time maps to its
        // first instant, an hour back: the search goes on through the repeat.
        for _ in 0..MAX_REPEATED {
            let next = self.cron.find_next_occurrence(&from, false).ok()?;
            if next.with_timezone(&Utc) > after {
                return Some(next.with_timezone(&Utc));
            }
            from = next;
        }
        None
    }

    /// The first `count` times strictly after `after`.
    pub fn upcoming(&self, after: DateTime<Utc>, count: usize) -> Vec<DateTime<Utc>> {
        let mut times = Vec::with_capacity(count);
        let mut from = after;
        while times.len() < count {
            let Some(next) = self.next_after(from) else {
                break;
            };
            times.push(next);
            from = next;
        }
        times
    }
}

/// A refusal of a bad value of `field`.
fn bad(field: &str, message: String) -> ErrorReply {
    ErrorReply::field(ErrorKind::BadRequest, field, message)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use orch_protocol::{CatchUp, ScheduledWork, TaskSpec};

    use super::*;

    fn spec(cron: &str, timezone: Option<&str>) -> ScheduleSpec {
        ScheduleSpec {
            name: "nightly".into(),
            cron: cron.into(),
            timezone: timezone.map(Into::into),
            catch_up: CatchUp::Skip,
            work: ScheduledWork::Task {
                task: Box::new(TaskSpec::command("true", vec![])),
            },
        }
    }

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
    }

    #[test]
    fn a_pattern_is_read_in_its_time_zone() {
        let times = Times::of(&spec("0 3 * * *", Some("Europe/Berlin"))).unwrap();
        // 03:00 in Berlin in winter is 02:00 UTC, in summer 01:00 UTC.
        assert_eq!(
            times.next_after(utc(2030, 1, 10, 12, 0, 0)),
            Some(utc(2030, 1, 11, 2, 0, 0))
        );
        assert_eq!(
            times.next_after(utc(2030, 7, 10, 12, 0, 0)),
            Some(utc(2030, 7, 11, 1, 0, 0))
        );
        let utc_times = Times::of(&spec("0 3 * * *", None)).unwrap();
        assert_eq!(
            utc_times.next_after(utc(2030, 1, 10, 12, 0, 0)),
            Some(utc(2030, 1, 11, 3, 0, 0))
        );
    }

    #[test]
    fn a_time_skipped_by_daylight_saving_runs_once_after_the_gap() {
        // Berlin skips 02:00-03:00 on 2030-03-31: 02:30 does not exist that day.
        let times = Times::of(&spec("30 2 * * *", Some("Europe/Berlin"))).unwrap();
        let runs = times.upcoming(utc(2030, 3, 30, 12, 0, 0), 2);
        assert_eq!(runs.len(), 2);
        assert!(runs[0] > utc(2030, 3, 30, 12, 0, 0) && runs[0] < utc(2030, 4, 1, 0, 0, 0));
        assert_eq!(
            runs[1],
            utc(2030, 4, 1, 0, 30, 0),
            "02:30 CEST the next day"
        );
    }

    #[test]
    fn in_a_repeated_hour_the_next_time_is_after_now_not_an_hour_back() {
        // New York repeats 01:00-02:00 on 2030-11-03 (EDT 05:00-06:00Z, then EST 06:00-07:00Z).
        let times = Times::of(&spec("*/5 * * * *", Some("America/New_York"))).unwrap();
        let second_pass = utc(2030, 11, 3, 6, 7, 0); // 01:07 EST
        let next = times.next_after(second_pass).unwrap();
        assert!(next > second_pass, "{next}");
        let upcoming = times.upcoming(second_pass, 3);
        assert!(upcoming.windows(2).all(|w| w[0] < w[1]), "{upcoming:?}");
        let every_second = Times::of(&spec("* * * * * *", Some("America/New_York"))).unwrap();
        assert!(every_second.next_after(second_pass).unwrap() > second_pass);
    }

    #[test]
    fn seconds_come_first_in_a_six_field_pattern() {
        let times = Times::of(&spec("*/2 * * * * *", None)).unwrap();
        let from = utc(2030, 1, 1, 0, 0, 1);
        assert_eq!(
            times.upcoming(from, 3),
            vec![
                utc(2030, 1, 1, 0, 0, 2),
                utc(2030, 1, 1, 0, 0, 4),
                utc(2030, 1, 1, 0, 0, 6)
            ]
        );
    }

    #[test]
    fn bad_names_patterns_and_zones_are_refused_naming_the_field() {
        let field = |s: ScheduleSpec| Times::of(&s).unwrap_err().field.unwrap();
        assert_eq!(field(spec("not cron", None)), "cron");
        assert_eq!(field(spec("61 * * * *", None)), "cron");
        assert_eq!(field(spec(&"* ".repeat(200), None)), "cron");
        assert_eq!(field(spec("0 3 * * *", Some("Mars/Olympus"))), "timezone");
        let mut named = spec("0 3 * * *", None);
        named.name = "../etc".into();
        assert_eq!(field(named), "name");
        let error = Times::of(&spec("0 3 * * *", Some("Europe/Berlin "))).unwrap_err();
        assert!(error.message.contains("IANA"), "{}", error.message);
    }
}
