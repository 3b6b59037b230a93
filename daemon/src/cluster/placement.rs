//! The leader's side of running attempts on the cluster's nodes: the engine places each
//! attempt on a node in the transaction that marks it running (see
//! [`crate::store::PlacementWrites`]); this module tells the engine which nodes there are
//! and what became of the attempts they ran.
//!
//! - Nodes: every tenth of a lease, the nodes' rows are read; the live ones take attempts
//!   (their `--parallel` and labels), and the attempts of a node that no longer holds
//!   any (its lease and any dead instance's fence ran out, so its supervisor has killed
//!   them) are interrupted by the engine and follow their retry policy.
//! - Outcomes: at each wake-up from a node (LISTEN/NOTIFY), and every second as a
//!   fallback, the outcomes the nodes wrote are handed to the engine as reports; the
//!   engine commits each with the task's next state and removes its placement in the
//!   same transaction.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use orch_protocol::{AttemptOutcome, Progress, TaskId};
use tokio_util::sync::CancellationToken;

use super::blocking;
use super::wakeups::Wakeups;
use crate::engine::{EngineHandle, NodeName, NodeOffer, Nodes, Placement};
use crate::runner::{Report, ReportKind};
use crate::store::{NodeSlots, PostgresStore, StoreError};

/// How often outcomes are read when no wake-up comes (and the listening connection
/// works).
const OUTCOME_POLL: Duration = Duration::from_secs(1);
/// How often outcomes are read while the listening connection is down.
const OUTCOME_POLL_UNHEARD: Duration = Duration::from_millis(200);

/// What a node's worker writes as an attempt's outcome.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeOutcome {
    /// The attempt ended.
    Exited(AttemptOutcome),
    /// It could not start for lack of resources (or was never started): tried again
    /// without using an attempt.
    NotStarted(String),
}

impl NodeOutcome {
    /// The outcome as the runner reports it.
    fn report(self) -> ReportKind {
        match self {
            NodeOutcome::Exited(outcome) => ReportKind::Exited(outcome),
            NodeOutcome::NotStarted(reason) => ReportKind::NotStarted(reason),
        }
    }
}

/// The engine's nodes and placements as the leader starts.
pub fn starting(store: &PostgresStore) -> Result<(Nodes, Placement), StoreError> {
    let (offers, _) = offers(&store.node_slots()?);
    let placed = store.placements()?;
    let placed = placed
        .into_iter()
        .map(|(id, attempt, node)| (id, attempt, NodeName::from(node)))
        .collect();
    Ok((Nodes::cluster(offers), Placement { placed }))
}

/// Follows the nodes and their outcomes for the engine, until `stop`.
pub fn follow(
    store: Arc<PostgresStore>,
    engine: EngineHandle,
    tick: Duration,
    stop: CancellationToken,
) {
    tokio::spawn(async move {
        let mut follower = Follower {
            store,
            engine,
            nodes: None,
            fed: HashSet::new(),
            progress: HashMap::new(),
        };
        follower.run(tick, stop).await;
    });
}

/// What the leader's follower knows.
struct Follower {
    store: Arc<PostgresStore>,
    engine: EngineHandle,
    /// The nodes last told to the engine.
    nodes: Option<(Vec<NodeOffer>, HashSet<NodeName>)>,
    /// The outcomes handed to the engine whose placements were still there at the last
    /// read (their commit is under way).
    fed: HashSet<(TaskId, u32)>,
    /// The version of each running attempt's progress handed to the engine.
    progress: HashMap<(TaskId, u32), u64>,
}

impl Follower {
    async fn run(&mut self, tick: Duration, stop: CancellationToken) {
        let store = self.store.clone();
        let mut wakeups = Wakeups::new(
            blocking(move || store.outcome_wakeups()).await,
            OUTCOME_POLL,
            OUTCOME_POLL_UNHEARD,
            "the nodes' outcomes",
        );
        let mut nodes_tick = tokio::time::interval(tick);
        nodes_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            self.outcomes().await;
            tokio::select! {
                () = stop.cancelled() => return,
                _ = nodes_tick.tick() => self.nodes().await,
                () = wakeups.next() => {}
            }
        }
    }

    /// Hands what the nodes reported and was not handed yet to the engine: each
    /// attempt's new progress, then its outcome.
    async fn outcomes(&mut self) {
        let store = self.store.clone();
        let reports = match blocking(move || store.placement_reports()).await {
            Ok(reports) => reports,
            Err(e) => return tracing::warn!(error = %e, "cannot read the nodes' outcomes"),
        };
        let mut ended = HashSet::new();
        let mut progressed = HashMap::new();
        for report in reports {
            let key = (report.id, report.attempt);
            if let Some((version, text)) = report.progress {
                progressed.insert(key, version);
                self.progress_of(key, version, &text);
            }
            if let Some(text) = report.outcome {
                ended.insert(key);
                if !self.fed.contains(&key) {
                    self.outcome_of(key, &text);
                }
            }
        }
        self.fed = ended;
        self.progress = progressed;
    }

    /// Hands attempt `key`'s progress `text` to the engine unless this `version` was.
    fn progress_of(&self, (id, attempt): (TaskId, u32), version: u64, text: &str) {
        if self.progress.get(&(id, attempt)) == Some(&version) {
            return;
        }
        if let Ok(progress) = serde_json::from_str::<Progress>(text) {
            let kind = ReportKind::Progress(progress);
            self.engine.report(Report { id, attempt, kind });
        }
    }

    /// Hands attempt `key`'s outcome `text` to the engine.
    fn outcome_of(&self, (id, attempt): (TaskId, u32), text: &str) {
        let kind = match serde_json::from_str::<NodeOutcome>(text) {
            Ok(outcome) => outcome.report(),
            Err(e) => {
                let error = format!("its node reported an outcome this daemon cannot read: {e}");
                ReportKind::Exited(AttemptOutcome::SpawnFailed { error })
            }
        };
        self.engine.report(Report { id, attempt, kind });
    }

    /// Tells the engine the nodes, when they changed. The outcomes are read after the
    /// nodes and handed over first, so that one a node wrote before its lease ran out is
    /// committed rather than its attempt interrupted.
    async fn nodes(&mut self) {
        let store = self.store.clone();
        let slots = match blocking(move || store.node_slots()).await {
            Ok(slots) => slots,
            Err(e) => return tracing::warn!(error = %e, "cannot read the cluster's nodes"),
        };
        let now = offers(&slots);
        if self.nodes.as_ref() != Some(&now) {
            self.outcomes().await;
            self.engine.nodes(now.0.clone(), now.1.clone());
            self.nodes = Some(now);
        }
    }
}

/// The live nodes as offers, and the names of the nodes whose attempts may still run.
fn offers(slots: &[NodeSlots]) -> (Vec<NodeOffer>, HashSet<NodeName>) {
    let offers = slots
        .iter()
        .filter(|s| s.live && s.parallel > 0)
        .map(|s| NodeOffer {
            name: NodeName::from(s.name.as_str()),
            capacity: s.parallel as usize,
            labels: s.labels.clone(),
        })
        .collect();
    let holding = slots
        .iter()
        .filter(|s| s.holding)
        .map(|s| NodeName::from(s.name.as_str()))
        .collect();
    (offers, holding)
}
