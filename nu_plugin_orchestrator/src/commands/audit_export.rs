//! `orch audit export <seq>`: an archived audit segment's content.

use nu_plugin::{EngineInterface, EvaluatedCall, PluginCommand};
use nu_protocol::{
    Category, Example, LabeledError, PipelineData, Signature, Spanned, SyntaxShape, Type,
};
use orch_protocol::Request;

use super::logs::stream_log;
use crate::OrchestratorPlugin;

/// `orch audit export`
pub struct AuditExport;

impl PluginCommand for AuditExport {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch audit export"
    }

    fn description(&self) -> &str {
        "The archived segment holding an audit entry, as it is on disk: one entry per line (JSON), to save and check offline."
    }

    fn extra_description(&self) -> &str {
        "Check a saved copy without a daemon: `provisioning-orchestrator audit verify-segment FILE --sha256 HEX`, with the `sha256` that `orch audit segments` lists for it."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::String)
            .required(
                "seq",
                SyntaxShape::Int,
                "An entry in the segment (its first, for example).",
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch audit export 1 | save audit-1.jsonl",
                description: "Save the oldest segment",
                result: None,
            },
            Example {
                example: "orch audit export 1 | from json --objects | where action == cancel",
                description: "Archived cancels",
                result: None,
            },
        ]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: PipelineData,
    ) -> Result<PipelineData, LabeledError> {
        let seq: Spanned<i64> = call.req(0)?;
        let span = seq.span;
        let seq = u64::try_from(seq.item).map_err(|_| {
            LabeledError::new("invalid sequence number")
                .with_label("audit entries are numbered from 1", span)
        })?;
        stream_log(plugin, engine, call, &Request::AuditExport { seq }, span)
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&AuditExport);
}
