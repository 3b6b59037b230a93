//! `orch audit`: the audit log of change requests.

use nu_plugin::{EngineInterface, EvaluatedCall, PluginCommand};
use nu_protocol::{
    Category, Example, LabeledError, ListStream, PipelineData, Signature, Spanned, SyntaxShape,
    Type,
};
use orch_protocol::{AuditFilter, Request, Response};

use super::args;
use crate::OrchestratorPlugin;
use crate::audit_values::audit_entry;
use crate::connection::{labeled, unexpected};

/// `orch audit`
pub struct Audit;

impl PluginCommand for Audit {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch audit"
    }

    fn description(&self) -> &str {
        "The audit log: every change request (submit, cancel, retry, shutdown) with who, when, its parameters (secrets redacted) and its outcome, newest first."
    }

    fn extra_description(&self) -> &str {
        "Entries are hash-chained: `orch audit verify` detects an edited, removed or reordered entry. Only live entries are listed: older ones may be archived to segments (`orch audit segments`, `orch audit export`)."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::table())
            .named(
                "action",
                SyntaxShape::String,
                "Only this action (submit, cancel, retry, shutdown).",
                Some('a'),
            )
            .named(
                "uid",
                SyntaxShape::Int,
                "Only the requests of this user id.",
                Some('u'),
            )
            .switch(
                "refused",
                "Only requests that were refused or failed.",
                None,
            )
            .named(
                "limit",
                SyntaxShape::Int,
                "At most this many entries (default 100).",
                Some('n'),
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch audit --limit 20",
                description: "The last 20 change requests",
                result: None,
            },
            Example {
                example: "orch audit --action cancel --refused",
                description: "Refused cancels",
                result: None,
            },
            Example {
                example: "orch audit --uid 1001 --limit 20",
                description: "The last 20 requests of user 1001",
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
        let uid = match call.get_flag::<Spanned<i64>>("uid")? {
            Some(uid) => Some(u32::try_from(uid.item).map_err(|_| {
                LabeledError::new("invalid user id")
                    .with_label("a user id is 0 to 4294967295", uid.span)
            })?),
            None => None,
        };
        let filter = AuditFilter {
            action: call.get_flag("action")?,
            limit: Some(args::limit_flag(call)?.unwrap_or(100)),
            before: None,
            uid,
            ok: call.has_flag("refused")?.then_some(false),
        };
        let entries = match plugin.call(engine, &Request::Audit { filter }) {
            Ok(Response::Audit { entries }) => entries,
            Ok(other) => return Err(unexpected(other, call.head)),
            Err(e) => return Err(labeled(e, call.head, &[])),
        };
        let head = call.head;
        let rows = entries.into_iter().map(move |e| audit_entry(&e, head));
        Ok(PipelineData::list_stream(
            ListStream::new(rows, head, engine.signals().clone()),
            None,
        ))
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&Audit);
}
