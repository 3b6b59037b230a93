//! `orch notify add|list|remove|test`: notifications of task and workflow events to a
//! webhook (signed) or a local command, through a durable outbox.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{
    Category, Example, IntoValue, LabeledError, Signature, Span, Spanned, SyntaxShape, Type, Value,
};
use orch_protocol::{
    Notifier, NotifierChange, NotifierSpec, NotifyFilter, NotifyTarget, Request, Response,
};

use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};
use crate::convert::{date, int};

/// `orch notify add`
pub struct NotifyAdd;

/// `orch notify list`
pub struct NotifyList;

/// `orch notify remove` or `orch notify test`.
pub struct NotifyChange {
    name: &'static str,
    description: &'static str,
    change: NotifierChange,
    example: (&'static str, &'static str),
}

/// `orch notify remove`
pub const REMOVE: NotifyChange = NotifyChange {
    name: "orch notify remove",
    description: "Remove a notifier; the notifications still waiting for it go too.",
    change: NotifierChange::Remove,
    example: ("orch notify remove ci", "Stop notifying ci"),
};

/// `orch notify test`
pub const TEST: NotifyChange = NotifyChange {
    name: "orch notify test",
    description: "Send a notifier a test notification (type `test`), through the outbox like any other: `orch notify list` shows whether it was delivered.",
    change: NotifierChange::Test,
    example: (
        "orch notify test ci",
        "Check that ci's receiver gets notifications",
    ),
};

/// One notifier as a row.
#[derive(IntoValue)]
struct NotifierRow {
    name: String,
    kind: &'static str,
    /// The URL, or the command.
    target: Value,
    events: Vec<String>,
    label: Option<String>,
    workflow: Option<i64>,
    delivered: i64,
    given_up: i64,
    waiting: i64,
    last_error: Option<String>,
    created: chrono::DateTime<chrono::FixedOffset>,
}

fn row(notifier: Notifier, span: Span) -> Value {
    let (kind, target) = match &notifier.spec.target {
        NotifyTarget::Webhook { url, .. } => ("webhook", Value::string(url, span)),
        NotifyTarget::Command { command } => {
            let words = command.iter().map(|w| Value::string(w, span)).collect();
            ("command", Value::list(words, span))
        }
    };
    let filter = notifier.spec.filter;
    let events = if filter.events.is_empty() {
        orch_protocol::DEFAULT_EVENTS
            .iter()
            .map(|e| e.to_string())
            .collect()
    } else {
        filter.events
    };
    NotifierRow {
        name: notifier.spec.name,
        kind,
        target,
        events,
        label: filter.label,
        workflow: filter.workflow.map(int),
        delivered: int(notifier.delivered),
        given_up: int(notifier.given_up),
        waiting: int(notifier.waiting),
        last_error: notifier.last_error,
        created: date(notifier.created_at),
    }
    .into_value(span)
}

fn orchestrator() -> Category {
    Category::Custom("orchestrator".into())
}

impl SimplePluginCommand for NotifyAdd {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch notify add"
    }

    fn description(&self) -> &str {
        "Notify a webhook (a signed POST) or a local command of task and workflow events: the ends of tasks and the changes of workflows unless --events says which."
    }

    fn extra_description(&self) -> &str {
        r#"Each notification is committed to an outbox with its event, so a crash loses none; it is tried until delivered (a 2xx answer, or exit 0), up to 10 times with a growing wait, and may arrive more than once: `X-Orch-Delivery` (or $env.ORCH_DELIVERY) is its idempotency key.

A webhook gets JSON ({delivery, notifier, type, task, label, event}) with `X-Orch-Timestamp` (Unix seconds), `X-Orch-Signature: sha256=<hex HMAC-SHA256, keyed by --secret, of the timestamp, a dot and the body>` (refuse old timestamps to refuse replays) and `X-Orch-Event`. Plain http:// only; reach an HTTPS endpoint with a command hook such as [curl -sf -X POST -H 'Content-Type: application/json' --data-binary @- https://...]. A command gets the JSON on its standard input. Admins only."#
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .required("name", SyntaxShape::String, "The notifier's name.")
            .named("url", SyntaxShape::String, "A webhook: http://host[:port]/path.", Some('u'))
            .named("secret", SyntaxShape::String, "The webhook's HMAC key.", Some('s'))
            .named(
                "command",
                SyntaxShape::List(Box::new(SyntaxShape::Any)),
                "A local command instead: [program args...], the notification on its standard input.",
                Some('c'),
            )
            .named(
                "events",
                SyntaxShape::List(Box::new(SyntaxShape::String)),
                "Event types to send (succeeded, failed, cancelled, dependency_failed, workflow, started, paused, ...).",
                Some('e'),
            )
            .named("label", SyntaxShape::String, "Only tasks with this label.", Some('l'))
            .named("workflow", SyntaxShape::Int, "Only this workflow and its steps.", None)
            .category(orchestrator())
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch notify add ci --url http://127.0.0.1:9000/hook --secret $env.HOOK_SECRET --events [failed dependency_failed]",
                description: "Tell a local receiver about every failure",
                result: None,
            },
            Example {
                example: "orch notify add log --command [tee -a /var/log/orch-events.jsonl] --label db",
                description: "Append the events of tasks labelled db to a file",
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
        let name: Spanned<String> = call.req(0)?;
        let mut spans = vec![("name", name.span)];
        let mut span_of = |flag: &str, field: &'static str| {
            if let Some(span) = call.get_flag_span(flag) {
                spans.push((field, span));
            }
        };
        span_of("url", "url");
        span_of("secret", "secret");
        span_of("command", "command");
        span_of("events", "events");
        span_of("label", "label");
        let target = target(call)?;
        let workflow = match call.get_flag::<Spanned<i64>>("workflow")? {
            None => None,
            Some(w) => Some(u64::try_from(w.item).map_err(|_| {
                LabeledError::new("invalid --workflow")
                    .with_label(format!("a workflow id, not {}", w.item), w.span)
            })?),
        };
        let filter = NotifyFilter {
            events: call.get_flag("events")?.unwrap_or_default(),
            label: call.get_flag("label")?,
            workflow,
        };
        let spec = NotifierSpec {
            name: name.item,
            target,
            filter,
        };
        match plugin.call(engine, &Request::NotifierAdd { notifier: spec }) {
            Ok(Response::Notifier(notifier)) => Ok(row(*notifier, call.head)),
            Ok(other) => Err(unexpected(other, call.head)),
            Err(e) => Err(labeled(e, call.head, &spans)),
        }
    }
}

/// The target of `--url` and `--secret`, or of `--command` (one of them).
fn target(call: &EvaluatedCall) -> Result<NotifyTarget, LabeledError> {
    let url: Option<String> = call.get_flag("url")?;
    let command = match call.get_flag_value("command") {
        Some(value) => Some(words(&value)?),
        None => None,
    };
    match (url, command) {
        (Some(url), None) => {
            let secret: Option<String> = call.get_flag("secret")?;
            let secret = secret.ok_or_else(|| {
                LabeledError::new("missing --secret").with_label(
                    "a webhook needs --secret, the key its notifications are signed with",
                    call.get_flag_span("url").unwrap_or(call.head),
                )
            })?;
            Ok(NotifyTarget::Webhook { url, secret })
        }
        (None, Some(command)) => Ok(NotifyTarget::Command { command }),
        (Some(_), Some(_)) => Err(LabeledError::new("two targets")
            .with_label("--url here", call.get_flag_span("url").unwrap_or(call.head))
            .with_label(
                "and --command here: give one of them",
                call.get_flag_span("command").unwrap_or(call.head),
            )),
        (None, None) => Err(LabeledError::new("no target").with_label(
            "give --url (and --secret) for a webhook, or --command for a local command",
            call.head,
        )),
    }
}

/// A command's words: strings, and numbers or booleans as written (`[true]`).
fn words(value: &Value) -> Result<Vec<String>, LabeledError> {
    let list = value.as_list().map_err(|_| {
        LabeledError::new("invalid --command")
            .with_label("a list of words: [program args...]", value.span())
    })?;
    list.iter()
        .map(|word| match word {
            Value::String { val, .. } => Ok(val.clone()),
            Value::Int { .. } | Value::Float { .. } | Value::Bool { .. } => {
                Ok(word.to_expanded_string("", &nu_protocol::Config::default()))
            }
            other => Err(LabeledError::new("invalid --command").with_label(
                format!("a word is a string, not {}", other.get_type()),
                other.span(),
            )),
        })
        .collect()
}

impl SimplePluginCommand for NotifyList {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch notify list"
    }

    fn description(&self) -> &str {
        "The notifiers: target, filter, how many notifications each delivered and gave up on, how many wait, and the last failure."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::table())
            .category(orchestrator())
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: "orch notify list | where waiting > 0",
            description: "The notifiers with notifications not delivered yet",
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
        let notifiers = match plugin.call(engine, &Request::Notifiers) {
            Ok(Response::Notifiers { notifiers, .. }) => notifiers,
            Ok(other) => return Err(unexpected(other, call.head)),
            Err(e) => return Err(labeled(e, call.head, &[])),
        };
        let rows = notifiers.into_iter().map(|n| row(n, call.head)).collect();
        Ok(Value::list(rows, call.head))
    }
}

impl SimplePluginCommand for NotifyChange {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        self.description
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name)
            .input_output_type(Type::Nothing, Type::record())
            .required("name", SyntaxShape::String, "The notifier's name.")
            .category(orchestrator())
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: self.example.0,
            description: self.example.1,
            result: None,
        }]
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
        if !matches!(arg_type, nu_protocol::engine::ArgType::Positional(0)) {
            return None;
        }
        let Ok(Response::Notifiers { notifiers, .. }) = plugin.call(engine, &Request::Notifiers)
        else {
            return None;
        };
        let names: Vec<String> = notifiers.into_iter().map(|n| n.spec.name).collect();
        let pairs: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "")).collect();
        Some(crate::completions::words(&pairs))
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        let name: Spanned<String> = call.req(0)?;
        let request = Request::NotifierChange {
            name: name.item,
            change: self.change,
        };
        match plugin.call(engine, &request) {
            Ok(Response::Notifier(notifier)) => Ok(row(*notifier, call.head)),
            Ok(other) => Err(unexpected(other, call.head)),
            Err(e) => Err(labeled(e, call.head, &[("name", name.span)])),
        }
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&NotifyAdd);
    super::examples::test_examples(&NotifyList);
    super::examples::test_examples(&REMOVE);
    super::examples::test_examples(&TEST);
}
