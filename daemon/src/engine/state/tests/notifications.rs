//! Notifications: the events a notifier's filter passes go to the outbox in the step
//! that logs them; a delivered entry leaves it, a failed one comes back later with a
//! backoff, and is given up on after the last try; removed notifiers and tests.

use orch_protocol::{Notifier, NotifierChange, NotifierSpec, NotifyFilter, NotifyTarget};

use super::*;
use crate::engine::state::notify::MAX_TRIES;

fn hook(name: &str, filter: NotifyFilter) -> NotifierSpec {
    NotifierSpec {
        name: name.into(),
        target: NotifyTarget::Webhook {
            url: "http://127.0.0.1:9/hook".into(),
            secret: "s".into(),
        },
        filter,
    }
}

/// The deliverer's report of a try of `entry` (its answer dropped).
fn delivered(entry: &orch_protocol::OutboxEntry, result: Result<(), String>) -> Command {
    let (reply, _) = oneshot::channel();
    Command::Delivered {
        entry: Box::new(entry.clone()),
        result,
        reply,
    }
}

impl Harness {
    fn add_notifier(&mut self, spec: NotifierSpec) -> Notifier {
        self.ask(|reply| Command::AddNotifier {
            actor: actor(),
            spec,
            reply,
        })
        .1
        .value()
    }
}

#[test]
fn the_events_a_filter_passes_are_in_the_outbox_of_their_step() {
    let mut h = Harness::new(2);
    h.add_notifier(hook("all", NotifyFilter::default()));
    let db_only = NotifyFilter {
        label: Some("db".into()),
        events: vec!["started".into(), "succeeded".into()],
        workflow: None,
    };
    h.add_notifier(hook("db", db_only));
    let (step, ids) = h.submit(vec![TaskSpec {
        label: Some("db".into()),
        ..task()
    }]);
    let keys: Vec<&str> = step.batch.outbox.iter().map(|e| e.key.as_str()).collect();
    let started = step
        .batch
        .events
        .iter()
        .find(|e| e.kind.name() == "started")
        .unwrap();
    assert_eq!(keys, vec![format!("{:020}.db", started.seq)]);
    assert!(step.effects.outbox_changed);
    let step = h.exit(ids[0], 0);
    let mut keys: Vec<&str> = step
        .batch
        .outbox
        .iter()
        .map(|e| e.notifier.as_str())
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, vec!["all", "db"], "succeeded passes both");
    let body: serde_json::Value = serde_json::from_str(&step.batch.outbox[0].body).unwrap();
    assert_eq!(body["label"], "db");
    assert_eq!(body["type"], "succeeded");
    assert_eq!(body["event"]["kind"]["type"], "succeeded");
    assert_eq!(body["delivery"], step.batch.outbox[0].key.as_str());
}

#[test]
fn a_failed_delivery_is_tried_again_later_then_given_up_on() {
    let mut h = Harness::new(1);
    h.add_notifier(hook("all", NotifyFilter::default()));
    let (_, ids) = h.submit(vec![task()]);
    let mut entry = h.exit(ids[0], 0).batch.outbox[0].clone();
    for attempt in 1..MAX_TRIES {
        let step = h.turn(vec![Input::Request(delivered(
            &entry,
            Err("refused".into()),
        ))]);
        entry = step.batch.outbox[0].clone();
        assert_eq!(entry.attempts, attempt);
        assert!(entry.due > h.now, "tried again later");
        assert_eq!(
            step.batch.notifiers[0].last_error.as_deref(),
            Some("refused")
        );
    }
    let step = h.turn(vec![Input::Request(delivered(
        &entry,
        Err("refused".into()),
    ))]);
    assert_eq!(step.batch.outbox_removals, vec![entry.key.clone()]);
    assert_eq!(step.batch.notifiers[0].given_up, 1);
}

#[test]
fn a_delivered_entry_leaves_the_outbox_and_a_removed_notifier_takes_its_entries() {
    let mut h = Harness::new(1);
    h.add_notifier(hook("all", NotifyFilter::default()));
    let (_, ids) = h.submit(vec![task(), task()]);
    let entry = h.exit(ids[0], 0).batch.outbox[0].clone();
    let step = h.turn(vec![Input::Request(delivered(&entry, Ok(())))]);
    assert_eq!(step.batch.outbox_removals, vec![entry.key]);
    assert_eq!(step.batch.notifiers[0].delivered, 1);
    let waiting = h.exit(ids[1], 0).batch.outbox[0].clone();
    let (step, mut answer) = h.ask(|reply| Command::ChangeNotifier {
        actor: actor(),
        name: "all".into(),
        change: NotifierChange::Remove,
        reply,
    });
    answer.value();
    assert_eq!(step.batch.notifier_removals, vec!["all".to_string()]);
    let step = h.turn(vec![Input::Request(delivered(
        &waiting,
        Err("its notifier was removed".into()),
    ))]);
    assert_eq!(step.batch.outbox_removals, vec![waiting.key]);
}

#[test]
fn a_test_notification_goes_through_the_outbox_and_names_are_unique() {
    let mut h = Harness::new(1);
    h.add_notifier(hook("all", NotifyFilter::default()));
    let (step, mut answer) = h.ask(|reply| Command::ChangeNotifier {
        actor: actor(),
        name: "all".into(),
        change: NotifierChange::Test,
        reply,
    });
    answer.value();
    assert!(step.batch.outbox[0].key.starts_with("test."));
    assert_eq!(step.batch.outbox[0].event, "test");
    let (_, mut again) = h.ask(|reply| Command::AddNotifier {
        actor: actor(),
        spec: hook("all", NotifyFilter::default()),
        reply,
    });
    assert_eq!(again.error().field.as_deref(), Some("name"));
}

#[test]
fn a_notifier_with_too_many_waiting_gives_up_on_new_ones_and_its_removal_purges_them() {
    let mut h = Harness::new(1);
    h.add_notifier(hook("all", NotifyFilter::default()));
    h.state.notifiers.get_mut("all").unwrap().waiting = orch_protocol::MAX_WAITING;
    let (_, ids) = h.submit(vec![task()]);
    let step = h.exit(ids[0], 0);
    assert!(step.batch.outbox.is_empty(), "dropped, not queued");
    let notifier = &step.batch.notifiers[0];
    assert_eq!(notifier.given_up, 1);
    assert!(
        notifier
            .last_error
            .as_deref()
            .unwrap()
            .contains("wait already")
    );
    let (step, mut answer) = h.ask(|reply| Command::ChangeNotifier {
        actor: actor(),
        name: "all".into(),
        change: NotifierChange::Remove,
        reply,
    });
    answer.value();
    assert_eq!(step.batch.outbox_purges, vec!["all".to_string()]);
}
