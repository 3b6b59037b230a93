//! `orch audit segments`: the audit log's archived segments.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Type, Value};
use orch_protocol::{Request, Response};

use crate::OrchestratorPlugin;
use crate::audit_values::segment;
use crate::connection::{labeled, unexpected};

/// `orch audit segments`
pub struct AuditSegments;

impl SimplePluginCommand for AuditSegments {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch audit segments"
    }

    fn description(&self) -> &str {
        "The archived segments of the audit log, oldest first: the entries each holds, its file in the data directory, and the SHA-256 its checkpoint entry sealed."
    }

    fn extra_description(&self) -> &str {
        "Compaction (`orch audit compact`, or the daemon's `--retain-audit`) moves the oldest entries to a segment file. `orch audit export` gives a segment's content; `provisioning-orchestrator audit verify-segment FILE --sha256 HEX` checks a copy without a daemon."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::table())
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: "orch audit segments | select first last size archived_at",
            description: "Which entries were archived, and when",
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
        let head = call.head;
        match plugin.call(engine, &Request::AuditSegments) {
            Ok(Response::AuditSegments { segments }) => Ok(Value::list(
                segments.iter().map(|s| segment(s, head)).collect(),
                head,
            )),
            Ok(other) => Err(unexpected(other, head)),
            Err(e) => Err(labeled(e, head, &[])),
        }
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&AuditSegments);
}
