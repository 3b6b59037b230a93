//! Which node of a cluster a new test environment goes to: a live node labelled
//! `docker` (its container engine is there), the one with the fewest live environments.

use orch_protocol::{EnvState, NodeInfo, NodeRole, TestEnv};

/// The label of the nodes whose container engine takes test environments.
pub const CONTAINER_LABEL: &str = "docker";

/// The node for a new environment, asked of the leader `me`: among the live nodes
/// labelled [`CONTAINER_LABEL`], the one with the fewest live environments in `envs`
/// (`me` first among equals, then by name); `me` when no live node carries the label (a
/// cluster that labels none keeps them on its leader, as a single daemon does).
pub fn choose(nodes: &[NodeInfo], me: &str, envs: &[TestEnv]) -> String {
    let live_on = |name: &str| {
        envs.iter()
            .filter(|e| e.node.as_deref().unwrap_or(me) == name)
            .filter(|e| !matches!(e.state, EnvState::Deleted { .. }))
            .count()
    };
    nodes
        .iter()
        .filter(|n| n.role != NodeRole::Down && n.labels.iter().any(|l| l == CONTAINER_LABEL))
        .min_by_key(|n| (live_on(&n.name), n.name != me, n.name.clone()))
        .map_or_else(|| me.to_string(), |n| n.name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn node(name: &str, role: NodeRole, labels: &[&str]) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            role,
            host: "h".into(),
            pid: 1,
            socket: String::new(),
            http: None,
            parallel: 4,
            labels: labels.iter().map(|l| l.to_string()).collect(),
            version: String::new(),
            started_at: Utc::now(),
            heartbeat_at: Utc::now(),
            lease_until: Utc::now(),
        }
    }

    fn env_on(id: u64, node: Option<&str>, deleted: bool) -> TestEnv {
        let mut env = crate::store::conformance::test_env(id);
        env.node = node.map(str::to_string);
        if deleted {
            env.state = EnvState::Deleted {
                at: Utc::now(),
                reason: orch_protocol::DeleteReason::Requested,
                failure: None,
            };
        }
        env
    }

    #[test]
    fn environments_go_to_the_live_docker_node_with_the_fewest() {
        let nodes = [
            node("n1", NodeRole::Leader, &[]),
            node("n2", NodeRole::Standby, &["docker", "region=a"]),
            node("n3", NodeRole::Standby, &["docker"]),
            node("n4", NodeRole::Down, &["docker"]),
        ];
        assert_eq!(choose(&nodes, "n1", &[]), "n2", "the first by name");
        let envs = [env_on(1, Some("n2"), false), env_on(2, Some("n3"), true)];
        assert_eq!(
            choose(&nodes, "n1", &envs),
            "n3",
            "deleted ones do not count"
        );
        let envs = [env_on(1, Some("n2"), false), env_on(2, Some("n3"), false)];
        assert_eq!(choose(&nodes, "n1", &envs), "n2");
        let nodes_with_me = [
            node("n1", NodeRole::Leader, &["docker"]),
            node("n0", NodeRole::Standby, &["docker"]),
        ];
        assert_eq!(choose(&nodes_with_me, "n1", &[]), "n1", "the leader first");
        // No node of it records one: environments of no node are the leader's.
        let old = [env_on(1, None, false)];
        assert_eq!(choose(&nodes_with_me, "n1", &old), "n0");
    }

    #[test]
    fn with_no_live_docker_node_the_leader_keeps_them() {
        let nodes = [
            node("n1", NodeRole::Leader, &[]),
            node("n2", NodeRole::Down, &["docker"]),
        ];
        assert_eq!(choose(&nodes, "n1", &[]), "n1");
        assert_eq!(choose(&[], "n1", &[]), "n1");
    }
}
