//! `orch audit compact --before <seq|datetime>`: archive the oldest audit entries.

use chrono::Utc;
use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, SyntaxShape, Type, Value};
use orch_protocol::{AuditCut, Request, Response};

use crate::OrchestratorPlugin;
use crate::audit_values::segment;
use crate::connection::{labeled, unexpected};

/// `orch audit compact`
pub struct AuditCompact;

impl SimplePluginCommand for AuditCompact {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch audit compact"
    }

    fn description(&self) -> &str {
        "Archive the oldest audit entries (below a sequence number, or committed before a time) to a sealed segment file; returns the new segment, or nothing when no entry is old enough."
    }

    fn extra_description(&self) -> &str {
        "The segment is written and synced first; then, in one transaction, its entries leave the live log and a checkpoint entry (its range, its last entry's hash and the file's SHA-256) is appended, so `orch audit verify` still checks the whole chain. A log that is not intact is not archived. Needs the admin role."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_types(vec![
                (Type::Nothing, Type::record()),
                (Type::Nothing, Type::Nothing),
            ])
            .required_named(
                "before",
                SyntaxShape::OneOf(vec![SyntaxShape::Int, SyntaxShape::DateTime]),
                "Archive the entries numbered below this, or committed before this time.",
                Some('b'),
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch audit compact --before ((date now) - 90day)",
                description: "Archive the entries older than 90 days",
                result: None,
            },
            Example {
                example: "orch audit compact --before 1000",
                description: "Archive entries up to 999",
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
        let head = call.head;
        let value: Value = call.get_flag("before")?.ok_or_else(|| {
            LabeledError::new("missing --before").with_label("say where to stop", head)
        })?;
        let span = value.span();
        let before = cut(value)?;
        match plugin.call(engine, &Request::AuditCompact { before }) {
            Ok(Response::AuditCompacted { segment: Some(s) }) => Ok(segment(&s, head)),
            Ok(Response::AuditCompacted { segment: None }) => Ok(Value::nothing(head)),
            Ok(other) => Err(unexpected(other, head)),
            Err(e) => Err(labeled(e, head, &[("before", span)])),
        }
    }
}

/// `--before` as a cut: a positive sequence number or a datetime.
fn cut(value: Value) -> Result<AuditCut, LabeledError> {
    let span = value.span();
    match value {
        Value::Int { val, .. } if val > 0 => Ok(AuditCut::Seq(val as u64)),
        Value::Date { val, .. } => Ok(AuditCut::Time(val.with_timezone(&Utc))),
        _ => Err(LabeledError::new("invalid --before")
            .with_label("a sequence number (1 or more) or a datetime", span)),
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&AuditCompact);
}
