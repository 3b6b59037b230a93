//! `orch audit verify`: check the audit log's hash chain, archived segments included.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Type, Value};
use orch_protocol::{Request, Response};

use crate::OrchestratorPlugin;
use crate::audit_values::report;
use crate::connection::{labeled, unexpected};

/// `orch audit verify`
pub struct AuditVerify;

impl SimplePluginCommand for AuditVerify {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch audit verify"
    }

    fn description(&self) -> &str {
        "Check the audit log: every entry intact, none removed, none out of order, archived segments included."
    }

    fn extra_description(&self) -> &str {
        "Each archived segment file is read and checked against the checkpoint entry that sealed it (its entries' chain, its SHA-256 and size), then the live entries up to the last one written: `entries` counts the live ones, `archived` those in segments, and `segments` lists them."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "if not (orch audit verify).intact { error make {msg: 'audit log tampered with'} }",
                description: "Fail a script when the audit log was tampered with",
                result: None,
            },
            Example {
                example: "orch audit verify | get segments | select first last file",
                description: "What was archived, and where",
                result: None,
            },
        ]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        match plugin.call(engine, &Request::AuditVerify) {
            Ok(Response::AuditReport(checked)) => Ok(report(checked, call.head)),
            Ok(other) => Err(unexpected(other, call.head)),
            Err(e) => Err(labeled(e, call.head, &[])),
        }
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&AuditVerify);
}
