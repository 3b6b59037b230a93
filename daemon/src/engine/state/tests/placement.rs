//! Attempts placed on the nodes of a cluster: capacity and labels, a task no node can take
//! now passed over, nodes that go away, and labels no node has.

use orch_protocol::TaskStatus::{Queued, RetryWaiting, Running};

use super::*;
use crate::engine::state::NodeOffer;

fn offer(name: &str, capacity: usize, labels: &[&str]) -> NodeOffer {
    NodeOffer {
        name: NodeName::from(name),
        capacity,
        labels: labels.iter().map(ToString::to_string).collect(),
    }
}

/// [`task`] for a node with `labels`.
fn on(labels: &[&str]) -> TaskSpec {
    TaskSpec {
        on: labels.iter().map(ToString::to_string).collect(),
        ..task()
    }
}

/// The node each launch of `step` names.
fn nodes_of(step: &Step) -> Vec<(TaskId, String)> {
    let launches = step.effects.launches.iter();
    launches
        .map(|s| (s.id, s.node.as_deref().unwrap_or("here").to_string()))
        .collect()
}

/// The cluster's nodes are now `offers`, and `holding` still hold their attempts.
fn nodes_now(offers: Vec<NodeOffer>, holding: &[&str]) -> Input {
    let holding = holding.iter().map(|n| NodeName::from(*n)).collect();
    Input::Nodes { offers, holding }
}

#[test]
fn attempts_fill_the_nodes_up_to_their_capacity_the_least_loaded_first() {
    let mut h = Harness::on(Nodes::cluster(vec![offer("a", 1, &[]), offer("b", 2, &[])]));
    let (step, ids) = h.submit(vec![task(), task(), task(), task()]);
    let placed = nodes_of(&step);
    assert_eq!(placed.len(), 3, "three slots in all: {placed:?}");
    let on_b = placed.iter().filter(|(_, n)| n == "b").count();
    assert_eq!(on_b, 2, "{placed:?}");
    assert_eq!(h.status(ids[3]), Queued);
    // A slot frees on a: the next task goes there.
    let on_a = placed.iter().find(|(_, n)| n == "a").unwrap().0;
    let step = h.exit(on_a, 0);
    assert_eq!(nodes_of(&step), vec![(ids[3], "a".to_string())]);
}

#[test]
fn a_task_goes_only_to_a_node_with_its_labels_and_waits_without_holding_others_back() {
    let mut h = Harness::on(Nodes::cluster(vec![
        offer("plain", 2, &[]),
        offer("box", 1, &["docker", "region=eu"]),
    ]));
    let (step, ids) = h.submit(vec![on(&["docker"]), on(&["docker"]), task()]);
    assert_eq!(
        nodes_of(&step),
        vec![(ids[0], "box".to_string()), (ids[2], "plain".to_string())],
        "the second docker task waits; the plain one behind it runs"
    );
    assert_eq!(h.status(ids[1]), Queued);
    // It waits aside: the turns that follow read and write nothing for it.
    assert!(h.turn(vec![]).is_empty());
    let step = h.exit(ids[2], 0);
    assert!(
        step.effects.launches.is_empty(),
        "plain is free, box is not"
    );
    let step = h.exit(ids[0], 0);
    assert_eq!(nodes_of(&step), vec![(ids[1], "box".to_string())]);
}

#[test]
fn labels_no_node_has_are_refused_naming_the_nodes() {
    let mut h = Harness::on(Nodes::cluster(vec![offer("a", 1, &["docker"])]));
    let (step, error) = h.submit_refused(vec![task(), on(&["gpu"])]);
    assert!(step.effects.launches.is_empty());
    assert_eq!(error.field.as_deref(), Some("on"));
    assert!(error.message.contains("task #1"), "{}", error.message);
    assert!(error.message.contains("a [docker]"), "{}", error.message);
    // A single daemon has its own labels.
    let mut single = Harness::on(Nodes::local(1, vec!["docker".into()]));
    let (step, _) = single.submit(vec![on(&["docker"])]);
    assert_eq!(nodes_of(&step).len(), 1);
    assert!(step.effects.launches[0].node.is_none(), "run here");
    let (_, error) = single.submit_refused(vec![on(&["gpu"])]);
    assert!(
        error.message.contains("this daemon [docker]"),
        "{}",
        error.message
    );
}

#[test]
fn a_node_gone_interrupts_its_attempts_which_retry_elsewhere_and_its_late_outcome_is_ignored() {
    let mut h = Harness::on(Nodes::cluster(vec![offer("a", 1, &[]), offer("b", 1, &[])]));
    let (step, ids) = h.submit(vec![retrying(1, 10), retrying(1, 10)]);
    let placed = nodes_of(&step);
    let on_a = placed.iter().find(|(_, n)| n == "a").unwrap().0;
    let on_b = placed.iter().find(|(_, n)| n == "b").unwrap().0;
    // a leaves, but still holds its attempts (its fence runs): nothing is interrupted.
    let step = h.turn(vec![nodes_now(vec![offer("b", 1, &[])], &["a", "b"])]);
    assert!(step.written().is_empty());
    assert_eq!(h.status(on_a), Running);
    // Its fence ran out: its attempt is interrupted and waits for its retry.
    let step = h.turn(vec![nodes_now(vec![offer("b", 1, &[])], &["b"])]);
    assert_eq!(step.written(), vec![(on_a, RetryWaiting)]);
    let outcome = h.task(on_a).attempts[0].outcome.clone();
    assert_eq!(outcome, Some(AttemptOutcome::Interrupted));
    // The retry goes to b once b is free.
    let step = h.fire(step.effects.timers[0]);
    assert!(step.effects.launches.is_empty(), "b is busy");
    let step = h.exit(on_b, 0);
    assert_eq!(nodes_of(&step), vec![(on_a, "b".to_string())]);
    assert_eq!(h.running_attempt(on_a), 2);
    // Attempt 1's outcome, arriving late, changes nothing.
    let late = Report {
        id: on_a,
        attempt: 1,
        kind: exited(0),
    };
    let step = h.turn(vec![Input::Report(late)]);
    assert!(step.written().is_empty());
    assert_eq!(h.running_attempt(on_a), 2);
    let _ = ids;
}
