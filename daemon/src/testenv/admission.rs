//! Admission of a creation request: its names, topology, taskservs, time to live and
//! limits are checked, the engine must answer and the images exist, and the number of
//! environments stays within `--max-test-envs`; only then is the environment recorded
//! (with the request's audit record) and built.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use orch_protocol::{
    Actor, EnvRequest, EnvSpec, EnvState, ErrorKind, ErrorReply, Resources, TestEnv,
};

use super::engine::ContainerEngine;
use super::{TestEnvService, plan, stages, topologies};
use crate::audit::AuditRecord;
use crate::extensions::Registry;

/// The longest time to live accepted: a week.
const MAX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

impl TestEnvService {
    /// Admits `request`, records the environment and builds it (see [`Self::build`]).
    pub(super) async fn create_env(
        self: &Arc<Self>,
        actor: Actor,
        request: EnvRequest,
    ) -> Result<TestEnv, ErrorReply> {
        let params = serde_json::to_value(&request).unwrap_or_default();
        let (env, engine) = match self.admit(&request).await {
            Ok(admitted) => admitted,
            Err(error) => {
                self.audit_refusal(actor, "test_env_create", params, &error)
                    .await;
                return Err(error);
            }
        };
        // The limit is counted again, and the environment recorded and claimed, under one
        // lock: two creations at once cannot both take the last place.
        let admission = self.admission.lock().await;
        if let Err(error) = self.check_limit() {
            drop(admission);
            self.audit_refusal(actor, "test_env_create", params, &error)
                .await;
            return Err(error);
        }
        let record = AuditRecord::new(actor, "test_env_create", params, Ok("accepted".into()));
        let env = self.save(env, Some(record)).await?;
        self.claim(env.id);
        drop(admission);
        let env = self.build(env, &engine, &request).await;
        self.release(env.id);
        if !matches!(env.state, EnvState::Deleted { .. }) {
            self.arm_ttl(env.id, env.expires_at);
        }
        Ok(env)
    }

    /// Checks a request (names, limits, engine, images) and drafts its record.
    async fn admit(&self, request: &EnvRequest) -> Result<(TestEnv, ContainerEngine), ErrorReply> {
        let bad = |message: String| ErrorReply::field(ErrorKind::BadRequest, "env", message);
        let registry = Registry::load(&self.config.modules_dir);
        if let EnvSpec::Cluster { name, topology } = &request.env {
            topologies::plain_name("name", name)?;
            topologies::plain_name("topology.name", &topology.name)?;
        }
        let topology = plan::topology(&request.env);
        topologies::check(&topology).map_err(bad)?;
        topologies::check_taskservs(&topology, &registry).map_err(bad)?;
        let ttl = ttl(request.ttl_ms, self.config.default_ttl)?;
        self.check_limit()?;
        check_resources(request.resources.as_ref())?;
        for node in &topology.nodes {
            check_resources(node.resources.as_ref())?;
        }
        let engine = self.engine_for_request().await?;
        let nodes = topology
            .nodes
            .iter()
            .map(|node| plan::node(node, request, &registry))
            .collect::<Result<Vec<_>, _>>()
            .map_err(bad)?;
        let images: std::collections::BTreeSet<&str> =
            nodes.iter().map(|n| n.image.as_str()).collect();
        for image in images {
            engine.ensure_image(image).await.map_err(bad)?;
        }
        let now = Utc::now();
        let env = TestEnv {
            id: 0,
            name: request.env.name().to_string(),
            kind: plan::kind(&request.env).to_string(),
            request: request.clone(),
            created_at: now,
            expires_at: now + ttl,
            network: String::new(),
            nodes,
            state: stages::initial(now),
            probes: Vec::new(),
            results: Vec::new(),
            diagnostics: None,
            node: self.config.node.clone(),
        };
        Ok((env, engine))
    }

    /// Refuses a creation when `--max-test-envs` environments exist.
    fn check_limit(&self) -> Result<(), ErrorReply> {
        // In a cluster the limit is each node's, for the environments on its engine.
        let existing = self.alive().iter().filter(|e| self.is_mine(e)).count();
        if existing >= self.config.max_envs {
            return Err(ErrorReply::new(
                ErrorKind::Conflict,
                format!(
                    "{existing} test environments exist and the limit is {} (--max-test-envs): delete one first",
                    self.config.max_envs
                ),
            ));
        }
        Ok(())
    }
}

/// The time to live a request asks for (`default` when none): positive and at most
/// [`MAX_TTL`].
fn ttl(requested_ms: Option<u64>, default: Duration) -> Result<chrono::Duration, ErrorReply> {
    let ttl = requested_ms.map_or(default, Duration::from_millis);
    if ttl.is_zero() || ttl > MAX_TTL {
        return Err(ErrorReply::field(
            ErrorKind::BadRequest,
            "ttl",
            "the time to live must be positive and at most 7 days",
        ));
    }
    Ok(chrono::Duration::from_std(ttl).expect("at most a week"))
}

/// Refuses limits no engine would honour.
fn check_resources(resources: Option<&Resources>) -> Result<(), ErrorReply> {
    let Some(resources) = resources else {
        return Ok(());
    };
    let bad = |message: &str| {
        Err(ErrorReply::field(
            ErrorKind::BadRequest,
            "resources",
            message,
        ))
    };
    if resources
        .cpus
        .is_some_and(|c| !c.is_finite() || c <= 0.0 || c > 1024.0)
    {
        return bad("`cpus` must be a positive number of CPUs (at most 1024)");
    }
    if resources
        .memory_mb
        .is_some_and(|m| !(6..=4 * 1024 * 1024).contains(&m))
    {
        return bad("`memory_mb` must be between 6 MiB and 4 TiB");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn the_time_to_live_is_positive_and_at_most_a_week() {
        assert_eq!(ttl(None, HOUR).unwrap(), chrono::Duration::hours(1));
        assert_eq!(ttl(Some(8000), HOUR).unwrap(), chrono::Duration::seconds(8));
        let week_ms = 7 * 24 * 3600 * 1000;
        assert!(ttl(Some(week_ms), HOUR).is_ok());
        for refused in [Some(0), Some(week_ms + 1)] {
            let error = ttl(refused, HOUR).unwrap_err();
            assert_eq!(error.field.as_deref(), Some("ttl"), "{refused:?}");
        }
        assert!(ttl(None, Duration::ZERO).is_err());
    }

    #[test]
    fn limits_no_engine_would_honour_are_refused() {
        let limits = |cpus, memory_mb| Resources { cpus, memory_mb };
        for good in [
            limits(Some(0.5), Some(256)),
            limits(None, None),
            limits(Some(1024.0), Some(6)),
        ] {
            assert!(check_resources(Some(&good)).is_ok(), "{good:?}");
        }
        for bad in [
            limits(Some(0.0), None),
            limits(Some(f64::NAN), None),
            limits(Some(1025.0), None),
            limits(None, Some(5)),
            limits(None, Some(4 * 1024 * 1024 + 1)),
        ] {
            let error = check_resources(Some(&bad)).unwrap_err();
            assert_eq!(error.field.as_deref(), Some("resources"), "{bad:?}");
        }
        assert!(check_resources(None).is_ok());
    }
}
