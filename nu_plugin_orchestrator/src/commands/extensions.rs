//! `orch extensions providers|taskservs|clusters`: the extensions the daemon reads from
//! nushell-modules, with any manifest that could not be loaded.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Type, Value};
use orch_protocol::{Request, Response};

use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};
use crate::workflow_values::{self, ExtensionKind};

/// One `orch extensions ...` command.
pub struct Extensions {
    name: &'static str,
    description: &'static str,
    kind: ExtensionKind,
    example: &'static str,
}

/// `orch extensions providers`
pub const PROVIDERS: Extensions = Extensions {
    name: "orch extensions providers",
    description: "List the providers (where servers come from).",
    kind: ExtensionKind::Providers,
    example: "orch extensions providers | select name version description",
};

/// `orch extensions taskservs`
pub const TASKSERVS: Extensions = Extensions {
    name: "orch extensions taskservs",
    description: "List the taskservs with their dependencies, add-ons, scripts and readiness probe.",
    kind: ExtensionKind::Taskservs,
    example: "orch extensions taskservs | select name dependencies addons",
};

/// `orch extensions clusters`
pub const CLUSTERS: Extensions = Extensions {
    name: "orch extensions clusters",
    description: "List the cluster definitions with their nodes.",
    kind: ExtensionKind::Clusters,
    example: "orch extensions clusters | where name == etcd-cluster | get nodes",
};

impl SimplePluginCommand for Extensions {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        self.description
    }

    fn extra_description(&self) -> &str {
        "A manifest that could not be loaded is listed as a row with its `path` and the `problem`."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name)
            .input_output_type(Type::Nothing, Type::table())
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: self.example,
            description: self.description,
            result: None,
        }]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        let answer = plugin
            .call(engine, &Request::Extensions)
            .map_err(|e| labeled(e, call.head, &[]))?;
        match answer {
            Response::Extensions(report) => {
                Ok(workflow_values::extensions(&report, self.kind, call.head))
            }
            other => Err(unexpected(other, call.head)),
        }
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&PROVIDERS);
    super::examples::test_examples(&TASKSERVS);
    super::examples::test_examples(&CLUSTERS);
}
