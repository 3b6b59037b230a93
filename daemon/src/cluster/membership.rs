//! A node's membership: its registration, the heartbeat that renews its lease, the
//! election that makes it the leader, and standing down.
//!
//! One thread of its own does the node's calls to the store, one at a time, every tenth
//! of the lease: a heartbeat (which also reads the leadership), and while no live node
//! leads, an attempt to take the leadership. Each renewal moves the deadline the
//! supervisor is given ([`Membership::fence_deadlines`]): a second (or a fifth of the
//! lease, if longer) before the lease can run out, by the local clock read before the
//! renewal was sent, so that the processes are gone before any other node may take over.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use orch_protocol::{ClusterView, Leadership, NodeHealth, NodeRole};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::store::{Beat, NodeRecord, PostgresStore, Registration, StoreError};

/// Why a node could not join its cluster.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// Another live daemon has the node's name.
    #[error(
        "the node name {name} is in use by a live daemon (pid {pid} on host {host}), whose lease it keeps renewing: give this daemon another --node"
    )]
    NameTaken {
        /// The name.
        name: String,
        /// The other daemon's process id.
        pid: u32,
        /// Its host.
        host: String,
    },
    /// The store failed.
    #[error("cannot register the node {name}: {source}")]
    Store {
        /// The name.
        name: String,
        /// Why.
        source: StoreError,
    },
}

/// The node's part, as its membership thread last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Another node leads (or none does yet).
    Standby,
    /// This node leads, in this term.
    Leading {
        /// The term.
        term: u64,
    },
    /// The node stood down; the daemon stops.
    StoodDown,
}

/// A node of a cluster.
pub struct Membership {
    store: Arc<PostgresStore>,
    record: NodeRecord,
    lease: Duration,
    part: watch::Sender<Part>,
    fence: watch::Sender<Option<tokio::time::Instant>>,
    /// Why the node stood down, once it has.
    stood_down: Mutex<Option<String>>,
    /// Stops the membership thread.
    stop: CancellationToken,
    /// The membership thread, once started.
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Membership {
    /// Registers `record` with a lease of `lease`. A name whose earlier daemon was
    /// killed is taken once that daemon's lease has run out (waiting for it); a name a
    /// live daemon keeps renewing is refused.
    pub fn join(
        store: Arc<PostgresStore>,
        record: NodeRecord,
        lease: Duration,
    ) -> Result<Arc<Membership>, ClusterError> {
        let deadline = Instant::now() + lease + Duration::from_secs(1);
        loop {
            let registered = store.register_node(&record, lease);
            match registered.map_err(|source| ClusterError::Store {
                name: record.name.clone(),
                source,
            })? {
                Registration::Registered => break,
                Registration::Taken { host, pid } if Instant::now() >= deadline => {
                    return Err(ClusterError::NameTaken {
                        name: record.name,
                        pid,
                        host,
                    });
                }
                Registration::Taken { .. } => std::thread::sleep(Duration::from_millis(200)),
            }
        }
        // A leader paused inside a write transaction holds a lock a takeover waits for:
        // the server ends such a session once it has been idle for the lease.
        store
            .end_idle_transactions_after(lease)
            .map_err(|source| ClusterError::Store {
                name: record.name.clone(),
                source,
            })?;
        tracing::info!(node = %record.name, lease = ?lease, "joined the cluster");
        Ok(Arc::new(Membership {
            store,
            record,
            lease,
            part: watch::Sender::new(Part::Standby),
            fence: watch::Sender::new(None),
            stood_down: Mutex::new(None),
            stop: CancellationToken::new(),
            thread: Mutex::new(None),
        }))
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.record.name
    }

    /// This daemon's instance (random, per process).
    pub fn instance(&self) -> &str {
        &self.record.instance
    }

    /// The node's lease.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Starts the membership thread; it runs until [`Self::leave`], and cancels
    /// `stand_down` when the node must stop (deposed, or its lease lost while leading).
    pub fn start(self: &Arc<Self>, stand_down: CancellationToken) {
        let membership = self.clone();
        let token = stand_down.clone();
        let spawned = std::thread::Builder::new()
            .name("cluster-membership".into())
            .spawn(move || membership.run(&token));
        match spawned {
            Ok(thread) => {
                *self.thread.lock().unwrap_or_else(PoisonError::into_inner) = Some(thread)
            }
            Err(e) => {
                self.stand_down(&format!("cannot start its membership thread: {e}"));
                stand_down.cancel();
            }
        }
    }

    /// Waits until this node leads (its term) or `stop` is cancelled (`None`).
    pub async fn until_leading(&self, stop: &CancellationToken) -> Option<u64> {
        let mut part = self.part.subscribe();
        tokio::select! {
            () = stop.cancelled() => None,
            led = part.wait_for(|p| !matches!(p, Part::Standby)) => match led.ok()?.clone() {
                Part::Leading { term } => Some(term),
                _ => None,
            },
        }
    }

    /// The node's part now.
    pub fn part(&self) -> Part {
        self.part.borrow().clone()
    }

    /// The deadlines by which the supervisor must have stopped this node's task
    /// processes unless a later one comes (`None` before the first renewal).
    pub fn fence_deadlines(&self) -> watch::Receiver<Option<tokio::time::Instant>> {
        self.fence.subscribe()
    }

    /// Why the node stood down, if it did.
    pub fn stood_down(&self) -> Option<String> {
        self.stood_down
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Why the node stood down, or (when its store refused a write before its heartbeat
    /// noticed) why it must: the leadership it lost, as the store has it now. `None` when
    /// it still leads (a write failed for another reason).
    pub fn stand_down_reason(&self) -> Option<String> {
        if let Some(reason) = self.stood_down() {
            return Some(reason);
        }
        let Part::Leading { term } = self.part() else {
            return None;
        };
        let reason = match self.store.cluster() {
            Ok((Some(leader), _)) if leader.term != term => format!(
                "deposed: node {} (term {}) took over the leadership it held in term {term}",
                leader.node, leader.term
            ),
            // Still the live leader: the write failed for another reason.
            Ok((_, nodes))
                if nodes
                    .iter()
                    .any(|n| n.name == self.record.name && n.role == NodeRole::Leader) =>
            {
                return None;
            }
            Ok(_) => format!("its lease ran out while it led in term {term}"),
            Err(e) => format!("its leadership (term {term}) cannot be read: {e}"),
        };
        self.stand_down(&reason);
        Some(reason)
    }

    /// Wake-ups from the store at each commit that adds events (LISTEN/NOTIFY).
    pub fn event_wakeups(&self) -> Result<watch::Receiver<u64>, StoreError> {
        self.store.event_wakeups()
    }

    /// Every node and the leadership, as the store has them.
    pub fn view(&self) -> Result<ClusterView, StoreError> {
        let (leader, nodes) = self.store.cluster()?;
        Ok(ClusterView {
            answered_by: self.record.name.clone(),
            leader,
            nodes,
        })
    }

    /// The node's own view, for its health report.
    pub fn health(&self) -> Result<NodeHealth, StoreError> {
        let view = self.view()?;
        let nodes_up = view
            .nodes
            .iter()
            .filter(|n| n.role != NodeRole::Down)
            .count();
        let role = match self.part() {
            Part::Leading { .. } => NodeRole::Leader,
            Part::Standby => NodeRole::Standby,
            Part::StoodDown => NodeRole::Down,
        };
        Ok(NodeHealth {
            node: self.record.name.clone(),
            role,
            leader: view.leader,
            nodes_up: u32::try_from(nodes_up).unwrap_or(u32::MAX),
        })
    }

    /// The leader as others should be told of it: its name, term and socket.
    pub fn leader_summary(&self) -> String {
        match self.view() {
            Ok(ClusterView {
                leader: Some(Leadership { node, term, .. }),
                nodes,
                ..
            }) => {
                let at = nodes
                    .iter()
                    .find(|n| n.name == node && n.role == NodeRole::Leader);
                match at {
                    Some(n) => format!(
                        "node {node} leads (term {term}; socket {} on host {})",
                        n.socket, n.host
                    ),
                    None => format!(
                        "node {node} led in term {term} and is down; a takeover is under way"
                    ),
                }
            }
            Ok(_) => "no node leads yet; an election is under way".into(),
            Err(e) => format!("the leader cannot be read: {e}"),
        }
    }

    /// The leader's socket, when the leader is alive on this host (a client here may
    /// send it what a standby does not serve).
    pub fn leader_socket_here(&self) -> Option<std::path::PathBuf> {
        let (leader, _) = self.store.cluster().ok()?;
        self.socket_here(&leader?.node, true)
    }

    /// Node `name`'s socket, when it is alive (and, with `leading`, leads) on this host.
    pub fn socket_here(&self, name: &str, leading: bool) -> Option<std::path::PathBuf> {
        let (_, nodes) = self.store.cluster().ok()?;
        let node = nodes.into_iter().find(|n| {
            n.name == name && n.role != NodeRole::Down && (!leading || n.role == NodeRole::Leader)
        })?;
        (node.host == self.record.host).then(|| node.socket.into())
    }

    /// Stops the membership thread (waiting for its last call), then ends the node's
    /// lease at once, unless it stood down; `attempts_left` when the stop leaves running
    /// attempts to the supervisor (no other node takes over before they are stopped).
    /// Blocks for up to one heartbeat.
    pub fn leave(&self, attempts_left: bool) {
        self.stop.cancel();
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
        if self.stood_down().is_some() {
            return;
        }
        let left = self
            .store
            .leave(&self.record.name, &self.record.instance, attempts_left);
        if let Err(e) = left {
            tracing::warn!(error = %e, "cannot end the node's lease; it runs out by itself");
        }
    }

    /// One heartbeat (and election, while no live node leads) before the thread starts,
    /// so that a node that may lead at once does before it serves anyone.
    pub fn beat_once(&self) {
        let sent = Instant::now();
        let beat = self
            .store
            .heartbeat(&self.record.name, &self.record.instance, self.lease);
        match beat {
            Ok(beat) => {
                let renewed = beat.renewed;
                match self.after_beat(beat) {
                    Some(reason) => tracing::warn!(%reason, "the first heartbeat"),
                    None if renewed => self.renewed(sent),
                    None => {}
                }
            }
            Err(e) => tracing::warn!(error = %e, "the first heartbeat failed; trying again"),
        }
    }

    /// The membership thread's loop.
    fn run(&self, stand_down: &CancellationToken) {
        let tick = self.lease / 10;
        let mut renewed_at = Instant::now();
        while !self.stop.is_cancelled() && !stand_down.is_cancelled() {
            let sent = Instant::now();
            let beat = self
                .store
                .heartbeat(&self.record.name, &self.record.instance, self.lease);
            let leading = matches!(self.part(), Part::Leading { .. });
            let reason = match beat {
                Ok(beat) => {
                    let renewed = beat.renewed;
                    let reason = self.after_beat(beat);
                    if renewed && reason.is_none() {
                        renewed_at = sent;
                        self.renewed(sent);
                    }
                    reason
                }
                Err(e) if leading && renewed_at.elapsed() >= self.lease => Some(format!(
                    "its lease ran out: the store did not renew it for {:?} ({e})",
                    renewed_at.elapsed()
                )),
                Err(e) => {
                    tracing::warn!(error = %e, "the heartbeat failed; trying again");
                    None
                }
            };
            if let Some(reason) = reason {
                self.stand_down(&reason);
                stand_down.cancel();
                return;
            }
            std::thread::sleep(tick.saturating_sub(sent.elapsed()));
        }
    }

    /// A renewal sent at `sent` succeeded: the supervisor's deadline moves, to a second
    /// (or a fifth of the lease, if longer) before the lease can run out.
    fn renewed(&self, sent: Instant) {
        let margin = (self.lease / 5).max(Duration::from_secs(1));
        let deadline = tokio::time::Instant::from_std(sent + self.lease - margin);
        self.fence.send_replace(Some(deadline));
    }

    /// Acts on what a heartbeat found; the reason to stand down, if any (its row taken
    /// by a daemon of the same name, or, while leading, the leadership by another node).
    fn after_beat(&self, beat: Beat) -> Option<String> {
        if !beat.renewed {
            return Some(format!(
                "its node row was taken by another daemon named {}",
                self.record.name
            ));
        }
        match self.part() {
            Part::Leading { term } => {
                let ours = beat
                    .leader
                    .as_ref()
                    .is_some_and(|l| l.term == term && l.instance == self.record.instance);
                if ours {
                    return None;
                }
                let by = beat.leader.map_or("another node".into(), |l| {
                    format!("node {} (term {})", l.node, l.term)
                });
                Some(format!(
                    "deposed: {by} took over the leadership it held in term {term}"
                ))
            }
            // A takeover whose answer was lost (a timeout) made this node the leader.
            Part::Standby
                if beat
                    .leader
                    .as_ref()
                    .is_some_and(|l| l.instance == self.record.instance) =>
            {
                let term = beat.leader.map_or(0, |l| l.term);
                self.lead(term);
                None
            }
            Part::Standby if !beat.leader_alive => self.elect(),
            Part::Standby | Part::StoodDown => None,
        }
    }

    /// Tries to take the leadership; on success the store is fenced by the new term
    /// before anyone is told.
    fn elect(&self) -> Option<String> {
        match self
            .store
            .try_lead(&self.record.name, &self.record.instance)
        {
            Ok(Some(term)) => self.lead(term),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "the election failed; trying again"),
        }
        None
    }

    /// This node leads in `term`: the store is fenced by it before anyone is told.
    fn lead(&self, term: u64) {
        self.store.fence(term, &self.record.instance);
        tracing::info!(node = %self.record.name, term, "took the leadership");
        self.part.send_replace(Part::Leading { term });
    }

    /// Records why the node stands down.
    fn stand_down(&self, reason: &str) {
        tracing::error!(node = %self.record.name, %reason, "standing down");
        *self
            .stood_down
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(reason.to_string());
        self.part.send_replace(Part::StoodDown);
    }
}
