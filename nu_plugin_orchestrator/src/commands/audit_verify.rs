//! `orch audit verify`: check the audit log's hash chain.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Type, Value, record};
use orch_protocol::{Request, Response};

use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};

/// `orch audit verify`
pub struct AuditVerify;

impl SimplePluginCommand for AuditVerify {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch audit verify"
    }

    fn description(&self) -> &str {
        "Check the audit log: every entry intact, none removed, none out of order."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: "if not (orch audit verify).intact { error make {msg: 'audit log tampered with'} }",
            description: "Fail a script when the audit log was tampered with",
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
        let report = match plugin.call(engine, &Request::AuditVerify) {
            Ok(Response::AuditReport(report)) => report,
            Ok(other) => return Err(unexpected(other, head)),
            Err(e) => return Err(labeled(e, head, &[])),
        };
        let opt = |v: Option<Value>| v.unwrap_or(Value::nothing(head));
        Ok(Value::record(
            record! {
                "intact" => Value::bool(report.intact, head),
                "entries" => Value::int(report.entries as i64, head),
                "bad_seq" => opt(report.bad_seq.map(|s| Value::int(s as i64, head))),
                "problem" => opt(report.problem.map(|p| Value::string(p, head))),
            },
            head,
        ))
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&AuditVerify);
}
