//! The last hour, minute by minute (`GET /activity`, the dashboard's throughput and its
//! failures of the last hour): tasks submitted, succeeded and failed for good, counted
//! from the event bus as they are committed.
//!
//! The counts are held in memory (60 small buckets), so answering costs nothing whatever
//! the store holds. At start the hour before is read back from the event log, at most
//! [`SEED_EVENTS`] events of it (in the background: the daemon answers meanwhile); when
//! the hour held more, or retention removed some of it, the answer says from when its
//! counts are whole (`counted_since`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Duration, DurationRound, Utc};
use orch_protocol::{Activity, ActivityMinute, Event, EventKind};
use tokio::sync::broadcast::error::RecvError;

use crate::events::EventBus;
use crate::store::Store;

/// How many minutes are kept.
const MINUTES: i64 = 60;

/// The most events read back from the log at start.
pub const SEED_EVENTS: u64 = 200_000;

/// How many logged events are read at a time while seeding.
const SEED_PAGE: usize = 2_000;

/// The counts of the last hour.
pub struct ActivityCounter {
    state: Mutex<State>,
}

struct State {
    /// By minute, oldest first; a minute with nothing in it may be missing.
    minutes: VecDeque<ActivityMinute>,
    /// From when the counts are whole.
    counted_since: DateTime<Utc>,
    /// The last event counted (seeding and following meet there).
    last_seq: u64,
}

impl ActivityCounter {
    /// Starts counting the bus's events, and reads the last hour back from the log.
    pub fn start(bus: &EventBus, store: Arc<dyn Store>) -> Arc<ActivityCounter> {
        let counter = Arc::new(ActivityCounter {
            state: Mutex::new(State {
                minutes: VecDeque::new(),
                counted_since: Utc::now(),
                last_seq: 0,
            }),
        });
        // Subscribed before the log is read, so that nothing committed meanwhile is
        // missed; what both see is counted once (by sequence number).
        let mut live = bus.subscribe();
        let following = counter.clone();
        tokio::spawn(async move {
            let seeding = following.clone();
            let seeded =
                tokio::task::spawn_blocking(move || seeding.seed(store.as_ref(), Utc::now()));
            if let Ok(Err(e)) = seeded.await {
                tracing::warn!(error = %e, "the last hour's activity could not be read back");
            }
            loop {
                match live.recv().await {
                    Ok(event) => following.count(&event),
                    Err(RecvError::Lagged(missed)) => {
                        tracing::debug!(missed, "activity counts fell behind the bus");
                        following.lose_until(Utc::now());
                    }
                    Err(RecvError::Closed) => return,
                }
            }
        });
        counter
    }

    /// Counts the last hour's events of the log (up to [`SEED_EVENTS`] of them).
    fn seed(&self, store: &dyn Store, now: DateTime<Utc>) -> Result<(), crate::store::StoreError> {
        let hour_ago = now - Duration::minutes(MINUTES);
        let last = store.last_event_seq()?;
        let from = last.saturating_sub(SEED_EVENTS);
        let missed_before = from > 0 || store.events_removed_through()? > 0;
        let mut after = from;
        let mut first: Option<DateTime<Utc>> = None;
        while after < last {
            let events = store.events_after(after, SEED_PAGE)?;
            let Some(end) = events.last().map(|e| e.seq) else {
                break;
            };
            for event in events.iter().filter(|e| e.seq <= last) {
                first.get_or_insert(event.at);
                if event.at >= hour_ago {
                    self.count(event);
                }
            }
            after = end;
        }
        {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.counted_since = match first {
                Some(first) if missed_before && first > hour_ago => first,
                _ => hour_ago,
            };
        }
        // The pages of up to SEED_EVENTS decoded events, freed in this thread's arena.
        crate::memory::return_freed_memory();
        Ok(())
    }

    /// Counts one event, once.
    fn count(&self, event: &Event) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if event.seq != 0 && event.seq <= state.last_seq {
            return;
        }
        state.last_seq = state.last_seq.max(event.seq);
        let (submitted, succeeded, failed) = match event.kind {
            EventKind::Submitted { .. } => (1, 0, 0),
            EventKind::Succeeded { .. } => (0, 1, 0),
            EventKind::Failed { .. } => (0, 0, 1),
            _ => return,
        };
        let minute = minute_of(event.at);
        let at = match state.minutes.iter().rposition(|m| m.at <= minute) {
            Some(i) if state.minutes[i].at == minute => i,
            Some(i) => {
                state.minutes.insert(i + 1, empty(minute));
                i + 1
            }
            None => {
                state.minutes.push_front(empty(minute));
                0
            }
        };
        let bucket = &mut state.minutes[at];
        bucket.submitted += submitted;
        bucket.succeeded += succeeded;
        bucket.failed += failed;
        let oldest = minute - Duration::minutes(MINUTES);
        while state.minutes.front().is_some_and(|m| m.at <= oldest) {
            state.minutes.pop_front();
        }
    }

    /// Events were lost (the counter fell behind the bus): the counts are whole only
    /// from `now` on.
    fn lose_until(&self, now: DateTime<Utc>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.counted_since = state.counted_since.max(now);
    }

    /// The last hour at `now`: 60 minutes, the current one last.
    pub fn view(&self, now: DateTime<Utc>) -> Activity {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let current = minute_of(now);
        let minutes: Vec<ActivityMinute> = (0..MINUTES)
            .rev()
            .map(|back| {
                let at = current - Duration::minutes(back);
                let held = state.minutes.iter().find(|m| m.at == at);
                held.copied().unwrap_or_else(|| empty(at))
            })
            .collect();
        let first = minutes.first().map_or(now, |m| m.at);
        Activity {
            counted_since: state.counted_since.max(first),
            failed_last_hour: minutes.iter().map(|m| m.failed).sum(),
            succeeded_last_hour: minutes.iter().map(|m| m.succeeded).sum(),
            minutes,
        }
    }
}

/// The start of `at`'s minute.
fn minute_of(at: DateTime<Utc>) -> DateTime<Utc> {
    at.duration_trunc(Duration::minutes(1)).unwrap_or(at)
}

fn empty(at: DateTime<Utc>) -> ActivityMinute {
    ActivityMinute {
        at,
        submitted: 0,
        succeeded: 0,
        failed: 0,
    }
}

#[cfg(test)]
mod tests {
    use orch_protocol::{AttemptOutcome, TaskStatus};

    use super::*;

    fn counter() -> ActivityCounter {
        ActivityCounter {
            state: Mutex::new(State {
                minutes: VecDeque::new(),
                counted_since: DateTime::<Utc>::MIN_UTC,
                last_seq: 0,
            }),
        }
    }

    fn event(seq: u64, at: DateTime<Utc>, kind: EventKind) -> Event {
        Event {
            seq,
            at,
            task: 1,
            workflow: None,
            kind,
        }
    }

    #[test]
    fn the_hour_is_counted_by_minute_and_each_event_once() {
        let now = "2026-12-05T12:30:20Z".parse::<DateTime<Utc>>().unwrap();
        let counter = counter();
        let submitted = EventKind::Submitted {
            status: TaskStatus::Queued,
        };
        let failed = EventKind::Failed {
            outcome: AttemptOutcome::Exited { code: 1 },
        };
        counter.count(&event(1, now - Duration::minutes(90), submitted.clone()));
        counter.count(&event(2, now - Duration::minutes(5), submitted.clone()));
        counter.count(&event(3, now - Duration::minutes(5), failed.clone()));
        counter.count(&event(3, now - Duration::minutes(5), failed.clone()));
        counter.count(&event(4, now, EventKind::Succeeded { attempt: 1 }));
        counter.count(&event(5, now, EventKind::Queued));
        // A later event of an earlier minute lands in its minute; an earlier event after
        // a later one was counted is one both the log and the bus passed on.
        counter.count(&event(7, now - Duration::minutes(2), failed.clone()));
        counter.count(&event(8, now - Duration::minutes(3), failed.clone()));
        counter.count(&event(6, now - Duration::minutes(4), failed));
        let view = counter.view(now);
        assert_eq!(view.minutes.len(), 60);
        assert_eq!(view.minutes[59].at, minute_of(now));
        assert_eq!(view.minutes[59].succeeded, 1);
        assert_eq!(view.minutes[54].submitted, 1);
        assert_eq!(view.minutes[54].failed, 1);
        assert_eq!(view.minutes[57].failed, 1);
        assert_eq!(view.minutes[56].failed, 1);
        assert_eq!(
            view.minutes[55].failed, 0,
            "seq 6 came after seq 8 was counted"
        );
        assert_eq!(view.failed_last_hour, 3);
        assert_eq!(view.succeeded_last_hour, 1);
        let submitted: u64 = view.minutes.iter().map(|m| m.submitted).sum();
        assert_eq!(submitted, 1, "the one 90 minutes ago is out of the hour");
        assert_eq!(view.counted_since, view.minutes[0].at);
    }
}
