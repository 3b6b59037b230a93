//! What the daemon decides about a test environment's objects on the container engine,
//! in one place: their names, their labels, and what the `local` provider is handed to
//! run a script on a node. The provider computes none of it for a test environment: the
//! server record names the node's container and the process gets the engine the daemon
//! uses (`DOCKER_HOST`), so the two layers cannot disagree.

use std::collections::HashMap;

use orch_protocol::{EnvId, EnvNode};
use serde_json::{Value, json};

/// The label naming a container's or network's test environment.
pub const ENV_LABEL: &str = "provisioning.testenv";
/// The label naming the daemon instance that created it.
pub const DAEMON_LABEL: &str = "provisioning.daemon";
/// The label naming a container's node role.
pub const ROLE_LABEL: &str = "provisioning.role";

/// The provider that runs the scripts of test environments' nodes.
pub const PROVIDER: &str = "local";

/// The names and labels of one daemon instance's test environments.
pub struct Naming {
    instance: String,
}

impl Naming {
    /// The naming of the daemon instance `instance` (its id).
    pub fn new(instance: String) -> Naming {
        Naming { instance }
    }

    /// The daemon instance's id (the value of [`DAEMON_LABEL`]).
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// The prefix of environment `id`'s container and network names, which is also the
    /// infra name its scripts see: unique across daemons on one engine.
    pub fn prefix(&self, id: EnvId) -> String {
        format!(
            "testenv-{}-{id}",
            &self.instance[..8.min(self.instance.len())]
        )
    }

    /// Environment `id`'s network.
    pub fn network(&self, id: EnvId) -> String {
        format!("{}-net", self.prefix(id))
    }

    /// The container of environment `id`'s node `node`.
    pub fn container(&self, id: EnvId, node: &str) -> String {
        format!("{}-{node}", self.prefix(id))
    }

    /// The labels of environment `id`'s network.
    pub fn network_labels(&self, id: EnvId) -> HashMap<String, String> {
        HashMap::from([
            (ENV_LABEL.to_string(), id.to_string()),
            (DAEMON_LABEL.to_string(), self.instance.clone()),
        ])
    }

    /// The labels of the container of environment `id`'s node with `role`.
    pub fn container_labels(&self, id: EnvId, role: &str) -> HashMap<String, String> {
        let mut labels = self.network_labels(id);
        labels.insert(ROLE_LABEL.to_string(), role.to_string());
        labels
    }

    /// The server record the provider gets for `node` of environment `id`: its hostname,
    /// role and infra, and the container it runs commands in.
    pub fn server(&self, id: EnvId, node: &EnvNode) -> Value {
        json!({
            "hostname": node.name,
            "role": node.role,
            "provider": PROVIDER,
            "infra": self.prefix(id),
            "container": node.container,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> EnvNode {
        EnvNode {
            name: "etcd-1".into(),
            role: "member".into(),
            taskservs: vec!["etcd".into()],
            container: "testenv-0123abcd-7-etcd-1".into(),
            image: "img".into(),
            resources: None,
        }
    }

    #[test]
    fn names_carry_the_instance_and_the_environment() {
        let naming = Naming::new("0123abcdef987654".into());
        assert_eq!(naming.prefix(7), "testenv-0123abcd-7");
        assert_eq!(naming.network(7), "testenv-0123abcd-7-net");
        assert_eq!(naming.container(7, "etcd-1"), "testenv-0123abcd-7-etcd-1");
        assert_eq!(Naming::new("ab".into()).prefix(1), "testenv-ab-1");
    }

    #[test]
    fn labels_name_the_environment_the_daemon_and_the_role() {
        let naming = Naming::new("0123abcdef987654".into());
        let labels = naming.container_labels(7, "member");
        assert_eq!(labels.len(), 3);
        assert_eq!(labels[ENV_LABEL], "7");
        assert_eq!(labels[DAEMON_LABEL], "0123abcdef987654");
        assert_eq!(labels[ROLE_LABEL], "member");
        assert!(!naming.network_labels(7).contains_key(ROLE_LABEL));
    }

    #[test]
    fn the_provider_is_told_the_container_not_left_to_derive_it() {
        let naming = Naming::new("0123abcdef987654".into());
        let server = naming.server(7, &node());
        assert_eq!(
            server,
            json!({"hostname": "etcd-1", "role": "member", "provider": "local",
                   "infra": "testenv-0123abcd-7", "container": "testenv-0123abcd-7-etcd-1"})
        );
    }
}
