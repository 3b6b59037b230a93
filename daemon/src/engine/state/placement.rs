//! Where attempts run. A single daemon is one node: it runs every attempt itself, up to
//! its parallel limit. In a cluster, the leader places each attempt on a live node with a
//! free slot and every label the task requires (`TaskSpec::on`), the least loaded first;
//! the node is named in the launch, and its worker runs it.

use std::collections::HashMap;
use std::sync::Arc;

/// A node's name (empty for the single daemon's own node).
pub type NodeName = Arc<str>;

/// A node that takes attempts: its capacity (`--parallel`) and labels (`--label`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOffer {
    /// Its name.
    pub name: NodeName,
    /// How many attempts it runs at once.
    pub capacity: usize,
    /// Its labels.
    pub labels: Vec<String>,
}

impl NodeOffer {
    /// Whether the node has every label of `on`.
    fn has_all(&self, on: &[String]) -> bool {
        on.iter().all(|label| self.labels.contains(label))
    }
}

/// The nodes attempts may be placed on, and how many of their slots are taken.
#[derive(Debug)]
pub struct Nodes {
    /// Whether launches name their node (a cluster), or all run here.
    placed: bool,
    offers: Vec<NodeOffer>,
    /// Slots taken per node, including nodes no longer offered (until their attempts end).
    taken: HashMap<NodeName, usize>,
}

impl Nodes {
    /// The single daemon's own node: `capacity` slots and its `labels`.
    pub fn local(capacity: usize, labels: Vec<String>) -> Nodes {
        let offer = NodeOffer {
            name: Arc::from(""),
            capacity: capacity.max(1),
            labels,
        };
        Nodes {
            placed: false,
            offers: vec![offer],
            taken: HashMap::new(),
        }
    }

    /// A cluster's nodes, as offered now (launches name their node).
    pub fn cluster(offers: Vec<NodeOffer>) -> Nodes {
        Nodes {
            placed: true,
            offers,
            taken: HashMap::new(),
        }
    }

    /// Whether launches name their node.
    pub fn placed(&self) -> bool {
        self.placed
    }

    /// The nodes offered now, replaced by `offers` (the slots taken are kept by name).
    pub fn replace(&mut self, offers: Vec<NodeOffer>) {
        self.offers = offers;
    }

    /// The slots of every node offered, together.
    pub fn capacity(&self) -> usize {
        self.offers.iter().map(|o| o.capacity).sum::<usize>().max(1)
    }

    /// Whether some node offered has a free slot.
    pub fn has_room(&self) -> bool {
        self.offers.iter().any(|o| self.room(o) > 0)
    }

    /// The node to run a task that requires `on`: of the nodes with a free slot and all
    /// those labels, the one with the most of its slots free (by share, then by number;
    /// the first offered on a tie). `None` when none has.
    pub fn pick(&self, on: &[String]) -> Option<NodeName> {
        self.offers
            .iter()
            .filter(|o| self.room(o) > 0 && o.has_all(on))
            .max_by(|a, b| {
                let share = |o: &NodeOffer| self.room(o) as f64 / o.capacity as f64;
                share(a)
                    .total_cmp(&share(b))
                    .then(self.room(a).cmp(&self.room(b)))
                    .then(std::cmp::Ordering::Greater)
            })
            .map(|o| o.name.clone())
    }

    /// Whether some node offered has every label of `on` (free or not); a task that
    /// requires none may wait for any node.
    pub fn can_run(&self, on: &[String]) -> bool {
        on.is_empty() || self.offers.iter().any(|o| o.has_all(on))
    }

    /// The labels of the nodes offered, for a refusal: `name [labels]` each.
    pub fn describe(&self) -> String {
        let each = self.offers.iter().map(|o| {
            let name = if o.name.is_empty() {
                "this daemon"
            } else {
                &o.name
            };
            format!("{name} [{}]", o.labels.join(", "))
        });
        each.collect::<Vec<_>>().join("; ")
    }

    /// One slot of `node` is taken.
    pub fn take(&mut self, node: &NodeName) {
        *self.taken.entry(node.clone()).or_default() += 1;
    }

    /// One slot of `node` is free again.
    pub fn free(&mut self, node: &NodeName) {
        if let Some(n) = self.taken.get_mut(node) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.taken.remove(node);
            }
        }
    }

    /// The free slots of `offer`.
    fn room(&self, offer: &NodeOffer) -> usize {
        let taken = self.taken.get(&offer.name).copied().unwrap_or(0);
        offer.capacity.saturating_sub(taken)
    }

    /// The node that runs what is not placed (the single daemon's own).
    pub fn here(&self) -> NodeName {
        self.offers
            .first()
            .map_or_else(|| Arc::from(""), |o| o.name.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(name: &str, capacity: usize, labels: &[&str]) -> NodeOffer {
        NodeOffer {
            name: Arc::from(name),
            capacity,
            labels: labels.iter().map(|l| l.to_string()).collect(),
        }
    }

    #[test]
    fn the_least_loaded_node_with_the_labels_is_picked() {
        let mut nodes = Nodes::cluster(vec![
            offer("a", 2, &["docker"]),
            offer("b", 4, &[]),
            offer("c", 2, &["docker", "region=eu"]),
        ]);
        let docker = vec!["docker".to_string()];
        assert_eq!(nodes.pick(&[]).as_deref(), Some("b"));
        nodes.take(&Arc::from("b"));
        nodes.take(&Arc::from("b"));
        nodes.take(&Arc::from("b"));
        // b has 1 of 4 free, a and c 2 of 2: a (first on a tie).
        assert_eq!(nodes.pick(&[]).as_deref(), Some("a"));
        assert_eq!(nodes.pick(&docker).as_deref(), Some("a"));
        nodes.take(&Arc::from("a"));
        assert_eq!(nodes.pick(&docker).as_deref(), Some("c"));
        let eu = vec!["region=eu".to_string(), "docker".to_string()];
        nodes.take(&Arc::from("c"));
        nodes.take(&Arc::from("c"));
        assert_eq!(nodes.pick(&eu), None, "c is full");
        assert!(nodes.can_run(&eu));
        assert!(!nodes.can_run(&["gpu".to_string()]));
        nodes.free(&Arc::from("c"));
        assert_eq!(nodes.pick(&eu).as_deref(), Some("c"));
    }

    #[test]
    fn a_node_no_longer_offered_keeps_its_slots_taken() {
        let mut nodes = Nodes::cluster(vec![offer("a", 1, &[]), offer("b", 1, &[])]);
        nodes.take(&Arc::from("a"));
        nodes.replace(vec![offer("b", 1, &[])]);
        assert_eq!(nodes.pick(&[]).as_deref(), Some("b"));
        nodes.replace(vec![offer("a", 1, &[]), offer("b", 1, &[])]);
        nodes.take(&Arc::from("b"));
        assert!(!nodes.has_room(), "a's attempt still runs");
        nodes.free(&Arc::from("a"));
        assert_eq!(nodes.pick(&[]).as_deref(), Some("a"));
        assert_eq!(nodes.capacity(), 2);
    }
}
