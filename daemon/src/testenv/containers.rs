//! An environment's objects on the engine: its network and one container per node,
//! created with the names and labels of [`super::contract`], started, and removed.

use orch_protocol::TestEnv;

use super::TestEnvService;
use super::engine::{ContainerEngine, ContainerSpec};

impl TestEnvService {
    /// Creates the environment's network, then its containers (stopped).
    pub(super) async fn create_objects(
        &self,
        env: &TestEnv,
        engine: &ContainerEngine,
    ) -> Result<(), String> {
        engine
            .create_network(&env.network, self.naming.network_labels(env.id))
            .await?;
        for node in &env.nodes {
            let spec = ContainerSpec {
                name: &node.container,
                hostname: &node.name,
                image: &node.image,
                network: &env.network,
                labels: self.naming.container_labels(env.id, &node.role),
                resources: node.resources.as_ref(),
            };
            engine.create_container(&spec).await?;
        }
        Ok(())
    }

    /// Starts the environment's containers.
    pub(super) async fn start_containers(
        &self,
        env: &TestEnv,
        engine: &ContainerEngine,
    ) -> Result<(), String> {
        for node in &env.nodes {
            engine.start(&node.container).await?;
        }
        Ok(())
    }

    /// Removes the environment's containers and network (a missing one is not an
    /// error), also when the record does not name them yet (a crash before it did).
    pub(super) async fn remove_objects(
        &self,
        env: &TestEnv,
        engine: &ContainerEngine,
    ) -> Result<(), String> {
        let mut errors = Vec::new();
        for node in &env.nodes {
            let container = if node.container.is_empty() {
                self.naming.container(env.id, &node.name)
            } else {
                node.container.clone()
            };
            errors.extend(engine.remove_container(&container).await.err());
        }
        let network = if env.network.is_empty() {
            self.naming.network(env.id)
        } else {
            env.network.clone()
        };
        errors.extend(engine.remove_network(&network).await.err());
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }
}
