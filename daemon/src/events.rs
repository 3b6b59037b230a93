//! The one event bus: every committed state change is published here, and every watcher
//! reads from it. Events are published only after the batch that logged them is durable.
//!
//! [`Stream`] is the one way to read it: it replays the log after a point, then follows
//! the bus, skipping what it already passed on (by sequence number) and re-reading the
//! log when it fell behind the bus. `orch watch`, `GET /events`, `orch wait` and a
//! workflow submission's wait all read through it.

use std::collections::VecDeque;
use std::sync::Arc;

use orch_protocol::{Event, EventKind, TaskId, WorkflowId};
use tokio::sync::broadcast;

use crate::store::{Store, StoreError};

/// How many events a slow subscriber may fall behind before it must re-read the log.
const CAPACITY: usize = 8192;

/// How many logged events are read from the store at a time.
const PAGE: usize = 1024;

/// Publishes committed events to any number of subscribers.
#[derive(Clone)]
pub struct EventBus {
    sender: broadcast::Sender<Arc<Event>>,
}

impl Default for EventBus {
    fn default() -> Self {
        EventBus {
            sender: broadcast::channel(CAPACITY).0,
        }
    }
}

impl EventBus {
    /// Publishes committed events, in order.
    pub fn publish(&self, events: Vec<Event>) {
        for event in events {
            // No subscriber is not an error: the log in the store has the event.
            let _ = self.sender.send(Arc::new(event));
        }
    }

    /// A new subscription that sees every event published from now on. A subscriber that
    /// lags gets `RecvError::Lagged` and catches up from the store's event log.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.sender.subscribe()
    }
}

/// Which events a [`Stream`] passes on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only this task's.
    pub task: Option<TaskId>,
    /// Only this workflow's and its steps'.
    pub workflow: Option<WorkflowId>,
    /// Only events of these types.
    pub types: Option<EventTypes>,
}

impl Filter {
    fn passes(&self, event: &Event) -> bool {
        self.task.is_none_or(|id| id == event.task)
            && self.workflow.is_none_or(|id| Some(id) == event.workflow)
            && self.types.is_none_or(|types| types.contains(&event.kind))
    }
}

/// A set of event types (the names of [`EventKind::NAMES`]), one bit each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventTypes(u32);

const _: () = assert!(
    EventKind::NAMES.len() <= 32,
    "EventTypes holds one bit per event type in a u32"
);

impl EventTypes {
    /// The types of a comma-separated list of names (`env,workflow`); the error names the
    /// first unknown one and lists the known ones.
    pub fn parse(list: &str) -> Result<EventTypes, String> {
        let mut bits = 0;
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let Some(index) = EventKind::NAMES.iter().position(|known| *known == name) else {
                return Err(format!(
                    "{name:?} is not an event type (the types: {})",
                    EventKind::NAMES.join(", ")
                ));
            };
            bits |= 1 << index;
        }
        if bits == 0 {
            return Err("no event type given".to_string());
        }
        Ok(EventTypes(bits))
    }

    /// Whether `kind` is one of these types.
    pub fn contains(&self, kind: &EventKind) -> bool {
        let index = EventKind::NAMES
            .iter()
            .position(|known| *known == kind.name());
        index.is_some_and(|i| self.0 & (1 << i) != 0)
    }
}

/// Committed events after a sequence number, in order, each once: the log first, then
/// the bus. Cancel-safe: a `next` dropped while it waits loses nothing.
pub struct Stream {
    store: Arc<dyn Store>,
    live: broadcast::Receiver<Arc<Event>>,
    /// The last sequence number read (passed on or filtered out).
    last: u64,
    filter: Filter,
    until_final: bool,
    /// Ends once the log is read, without following the bus.
    history_only: bool,
    /// Reading the log (at the start, and after falling behind the bus).
    replaying: bool,
    page: VecDeque<Event>,
    ended: bool,
}

impl Stream {
    /// A stream of the events after `after` that pass `filter`. It subscribes to the bus
    /// at once, so nothing committed from now on can be missed.
    pub fn new(bus: &EventBus, store: Arc<dyn Store>, after: u64, filter: Filter) -> Stream {
        Stream {
            live: bus.subscribe(),
            store,
            last: after,
            filter,
            until_final: false,
            history_only: false,
            replaying: true,
            page: VecDeque::new(),
            ended: false,
        }
    }

    /// A stream of every event committed from now on.
    pub fn from_now(bus: &EventBus, store: Arc<dyn Store>) -> Result<Stream, StoreError> {
        let live = Stream::new(bus, store, 0, Filter::default());
        let last = live.store.last_event_seq()?;
        Ok(Stream { last, ..live })
    }

    /// Ends the stream after the filtered task's final event, or after the change of the
    /// filtered workflow to the final state it is in now (a finished workflow can be
    /// rolled back later, and a replay goes on to that).
    pub fn until_final(self) -> Stream {
        Stream {
            until_final: true,
            ..self
        }
    }

    /// Ends the stream once the log is read (for a finished task or workflow whose final
    /// event the event retention may have removed).
    pub fn history_only(self) -> Stream {
        Stream {
            history_only: true,
            ..self
        }
    }

    /// The next event; `None` once the stream has ended (see [`Stream::until_final`]) or
    /// the bus has closed.
    pub async fn next(&mut self) -> Result<Option<Arc<Event>>, StoreError> {
        while !self.ended {
            let Some(event) = self.pull().await? else {
                return Ok(None);
            };
            if event.seq <= self.last {
                continue;
            }
            self.last = event.seq;
            if !self.filter.passes(&event) {
                continue;
            }
            self.ended = self.until_final && self.is_last(&event);
            return Ok(Some(event));
        }
        Ok(None)
    }

    /// The next event from the log or the bus, whether or not it was passed on already.
    async fn pull(&mut self) -> Result<Option<Arc<Event>>, StoreError> {
        loop {
            if self.replaying {
                if let Some(event) = self.page.pop_front() {
                    return Ok(Some(Arc::new(event)));
                }
                let page = self.store.events_after(self.last, PAGE)?;
                if page.is_empty() && self.history_only {
                    return Ok(None);
                }
                self.replaying = !page.is_empty();
                self.page = page.into();
                continue;
            }
            match self.live.recv().await {
                Ok(event) => return Ok(Some(event)),
                Err(broadcast::error::RecvError::Lagged(_)) => self.replaying = true,
                Err(broadcast::error::RecvError::Closed) => return Ok(None),
            }
        }
    }

    /// Whether `event` ends the stream under [`Stream::until_final`].
    fn is_last(&self, event: &Event) -> bool {
        match (self.filter.task, self.filter.workflow) {
            (Some(_), _) => event.kind.is_final(),
            (None, Some(id)) => self.ends_workflow(id, event),
            (None, None) => false,
        }
    }

    /// Whether `event` is the workflow's change to the final state it is in now.
    fn ends_workflow(&self, id: WorkflowId, event: &Event) -> bool {
        let EventKind::Workflow { status, .. } = &event.kind else {
            return false;
        };
        if event.task != id || !status.is_final() {
            return false;
        }
        self.store
            .workflow(id)
            .ok()
            .flatten()
            .is_none_or(|w| w.last_event == event.seq)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::{RedbStore, WriteBatch};

    fn event(seq: u64, task: TaskId, kind: EventKind) -> Event {
        Event {
            seq,
            at: chrono::Utc::now(),
            task,
            workflow: None,
            kind,
        }
    }

    /// Commits `events` to the log, then publishes them, as the committer does.
    fn commit(store: &RedbStore, bus: &EventBus, events: Vec<Event>) {
        let batch = WriteBatch {
            events: events.clone(),
            ..WriteBatch::default()
        };
        store.commit(&batch).unwrap();
        bus.publish(events);
    }

    fn store() -> (tempfile::TempDir, Arc<RedbStore>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(RedbStore::open(&dir.path().join("s.redb")).unwrap());
        (dir, store)
    }

    #[tokio::test]
    async fn a_stream_replays_the_log_then_follows_the_bus_once_each_filtered_to_the_final_event() {
        let (_dir, store) = store();
        let bus = EventBus::default();
        commit(
            &store,
            &bus,
            vec![
                event(1, 1, EventKind::Queued),
                event(2, 2, EventKind::Queued),
                event(3, 1, EventKind::Started { attempt: 1 }),
            ],
        );
        let only_task_1 = Filter {
            types: None,
            task: Some(1),
            workflow: None,
        };
        let mut stream = Stream::new(&bus, store.clone(), 1, only_task_1).until_final();
        assert_eq!(stream.next().await.unwrap().unwrap().seq, 3);
        // Published again (a duplicate), then new events: another task's, the final one,
        // and one after it.
        bus.publish(vec![event(3, 1, EventKind::Started { attempt: 1 })]);
        commit(
            &store,
            &bus,
            vec![
                event(4, 2, EventKind::Cancelled),
                event(5, 1, EventKind::Succeeded { attempt: 1 }),
                event(6, 1, EventKind::Removed),
            ],
        );
        assert_eq!(stream.next().await.unwrap().unwrap().seq, 5);
        assert!(stream.next().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_stream_that_fell_behind_the_bus_reads_what_it_missed_from_the_log_in_order() {
        let (_dir, store) = store();
        let bus = EventBus::default();
        commit(&store, &bus, vec![event(1, 1, EventKind::Queued)]);
        let mut stream = Stream::new(&bus, store.clone(), 0, Filter::default());
        assert_eq!(stream.next().await.unwrap().unwrap().seq, 1);
        // Now following the bus (a wait given up loses nothing) when more than it holds
        // is published.
        let waited = tokio::time::timeout(Duration::from_millis(20), stream.next()).await;
        assert!(waited.is_err());
        let more = (2..=CAPACITY as u64 + 10).map(|seq| event(seq, seq, EventKind::Queued));
        commit(&store, &bus, more.collect());
        drop(bus);
        let mut seen = Vec::new();
        while let Some(event) = stream.next().await.unwrap() {
            seen.push(event.seq);
        }
        assert_eq!(seen, (2..=CAPACITY as u64 + 10).collect::<Vec<_>>());
    }

    #[test]
    fn event_types_are_named_and_an_unknown_one_is_refused_with_the_known_ones() {
        let types = EventTypes::parse("env, workflow,").unwrap();
        assert!(types.contains(&EventKind::Workflow {
            status: orch_protocol::WorkflowStatus::Running,
            message: None,
        }));
        assert!(!types.contains(&EventKind::Cancelled));
        let error = EventTypes::parse("env,bogus").unwrap_err();
        assert!(
            error.contains("\"bogus\"") && error.contains("submitted"),
            "{error}"
        );
        assert!(EventTypes::parse(" , ").is_err(), "no type at all");
        let filter = Filter {
            types: Some(EventTypes::parse("cancelled").unwrap()),
            ..Filter::default()
        };
        assert!(filter.passes(&event(1, 7, EventKind::Cancelled)));
        assert!(!filter.passes(&event(2, 7, EventKind::Retried)));
    }
}
