//! `orch test topology list` and `orch test topology show <name>`: the topology templates
//! in nushell-modules/topologies.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Spanned, SyntaxShape, Type, Value};
use orch_protocol::{Request, Response, TopologiesReport, Topology};

use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};
use crate::testenv_values;

/// `orch test topology list`
pub struct TopologyList;

/// `orch test topology show`
pub struct TopologyShow;

/// Every template, from the daemon.
fn report(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    call: &EvaluatedCall,
) -> Result<TopologiesReport, LabeledError> {
    match plugin
        .call(engine, &Request::Topologies)
        .map_err(|e| labeled(e, call.head, &[]))?
    {
        Response::Topologies(report) => Ok(*report),
        other => Err(unexpected(other, call.head)),
    }
}

/// The template `name`, or an error listing the known ones.
pub fn find(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    call: &EvaluatedCall,
    name: &Spanned<String>,
) -> Result<Topology, LabeledError> {
    let report = report(plugin, engine, call)?;
    let known: Vec<String> = report.topologies.iter().map(|t| t.name.clone()).collect();
    report
        .topologies
        .into_iter()
        .find(|t| t.name == name.item)
        .ok_or_else(|| {
            LabeledError::new("unknown topology").with_label(
                format!(
                    "there is no topology `{}` (known: {})",
                    name.item,
                    known.join(", ")
                ),
                name.span,
            )
        })
}

impl SimplePluginCommand for TopologyList {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch test topology list"
    }

    fn description(&self) -> &str {
        "List the topology templates (a file that cannot be read is a row with its `problem`)."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::table())
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: "orch test topology list | select name cluster_type description",
            description: "The templates and what they are",
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
        let report = report(plugin, engine, call)?;
        let mut rows: Vec<Value> = report
            .topologies
            .iter()
            .map(|t| testenv_values::topology(t, call.head))
            .collect();
        rows.extend(
            report
                .problems
                .iter()
                .map(|p| testenv_values::topology(p, call.head)),
        );
        Ok(Value::list(rows, call.head))
    }
}

impl SimplePluginCommand for TopologyShow {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch test topology show"
    }

    fn description(&self) -> &str {
        "Show (load) a topology template, as a record `orch test env create cluster` takes from the pipeline."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .required("name", SyntaxShape::String, "The template's name.")
            .category(Category::Custom("orchestrator".into()))
    }

    #[allow(deprecated, reason = "nu-plugin marks dynamic completion experimental")]
    fn get_dynamic_completion(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        _call: nu_plugin::DynamicCompletionCall,
        arg_type: nu_protocol::engine::ArgType,
        _experimental: nu_protocol::engine::ExperimentalMarker,
    ) -> Option<Vec<nu_protocol::DynamicSuggestion>> {
        let first = matches!(arg_type, nu_protocol::engine::ArgType::Positional(0));
        first.then(|| {
            crate::completions::names(plugin, engine, crate::completions::Names::Topologies)
        })?
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: "orch test topology show etcd_cluster | get nodes",
            description: "The nodes of the etcd_cluster template",
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
        let name: Spanned<String> = call.req(0)?;
        Ok(testenv_values::topology(
            &find(plugin, engine, call, &name)?,
            call.head,
        ))
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&TopologyList);
    super::examples::test_examples(&TopologyShow);
}
