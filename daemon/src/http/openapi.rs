//! The OpenAPI 3.1 document, generated from the code: the route table below (the same
//! paths the router serves) and JSON Schemas derived from the protocol types (schemars).
//! `docs/openapi.json` is a copy kept in the repository; a test fails when they differ.

use orch_protocol::{
    AuditEntry, AuditReport, ClusterRequest, EnvRequest, ExtensionsReport, HealthReport,
    ServersRequest, Task, TaskservRequest, TestEnv, WorkflowPlan, WorkflowSummary, WorkflowView,
};
use schemars::generate::SchemaSettings;

use super::auth::TokenSummary;
use serde_json::{Map, Value, json};

/// One operation: method, path, summary, role, request body and answer schemas.
struct Operation {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    role: Option<&'static str>,
    body: Option<&'static str>,
    answer: Answer,
}

/// What an operation answers with.
enum Answer {
    /// A JSON value of a schema (`[X]` for an array of X).
    Json(&'static str),
    /// Plain text.
    Text,
    /// Server-sent events.
    Events,
}

const OPERATIONS: &[Operation] = &[
    Operation {
        method: "get",
        path: "/health",
        summary: "Service health: version, uptime, store, task counts",
        role: None,
        body: None,
        answer: Answer::Json("HealthReport"),
    },
    Operation {
        method: "get",
        path: "/openapi.json",
        summary: "This document",
        role: None,
        body: None,
        answer: Answer::Json("Object"),
    },
    Operation {
        method: "get",
        path: "/tasks",
        summary: "Tasks, newest first (query: status=a,b label limit)",
        role: Some("viewer"),
        body: None,
        answer: Answer::Json("[Task]"),
    },
    Operation {
        method: "get",
        path: "/tasks/{id}",
        summary: "One task, or the workflow with that id: its summary and a page of its steps (query: offset, limit; next_offset says where the next page starts)",
        role: Some("viewer"),
        body: None,
        answer: Answer::Json("Task"),
    },
    Operation {
        method: "post",
        path: "/workflows/servers/create",
        summary: "Submit a server creation workflow (201 with task_id; 200 with the plan in check mode)",
        role: Some("operator"),
        body: Some("ServersRequest"),
        answer: Answer::Json("WorkflowSubmission"),
    },
    Operation {
        method: "post",
        path: "/workflows/taskserv/create",
        summary: "Submit a taskserv creation workflow",
        role: Some("operator"),
        body: Some("TaskservRequest"),
        answer: Answer::Json("WorkflowSubmission"),
    },
    Operation {
        method: "post",
        path: "/workflows/cluster/create",
        summary: "Submit a cluster creation workflow",
        role: Some("operator"),
        body: Some("ClusterRequest"),
        answer: Answer::Json("WorkflowSubmission"),
    },
    Operation {
        method: "post",
        path: "/test/environments/create",
        summary: "Create a test environment (answered once settled)",
        role: Some("operator"),
        body: Some("EnvRequest"),
        answer: Answer::Json("TestEnv"),
    },
    Operation {
        method: "get",
        path: "/test/environments",
        summary: "Every test environment, newest first",
        role: Some("viewer"),
        body: None,
        answer: Answer::Json("[TestEnv]"),
    },
    Operation {
        method: "get",
        path: "/test/environments/{id}",
        summary: "One test environment",
        role: Some("viewer"),
        body: None,
        answer: Answer::Json("TestEnv"),
    },
    Operation {
        method: "delete",
        path: "/test/environments/{id}",
        summary: "Delete a test environment's containers and network",
        role: Some("operator"),
        body: None,
        answer: Answer::Json("TestEnv"),
    },
    Operation {
        method: "post",
        path: "/test/environments/{id}/run",
        summary: "Run a test environment's tests",
        role: Some("operator"),
        body: None,
        answer: Answer::Json("TestEnv"),
    },
    Operation {
        method: "get",
        path: "/test/environments/{id}/logs",
        summary: "A test environment's log (setup, probes, tests)",
        role: Some("viewer"),
        body: None,
        answer: Answer::Text,
    },
    Operation {
        method: "get",
        path: "/extensions/providers",
        summary: "Providers",
        role: Some("viewer"),
        body: None,
        answer: Answer::Json("Object"),
    },
    Operation {
        method: "get",
        path: "/extensions/taskservs",
        summary: "Taskservs",
        role: Some("viewer"),
        body: None,
        answer: Answer::Json("Object"),
    },
    Operation {
        method: "post",
        path: "/extensions/taskservs/install",
        summary: "Install a taskserv on servers of an infra (a taskserv workflow)",
        role: Some("operator"),
        body: Some("TaskservRequest"),
        answer: Answer::Json("WorkflowSubmission"),
    },
    Operation {
        method: "get",
        path: "/extensions/clusters",
        summary: "Cluster definitions",
        role: Some("viewer"),
        body: None,
        answer: Answer::Json("Object"),
    },
    Operation {
        method: "get",
        path: "/events",
        summary: "Server-sent events from the event bus (query: since, task, workflow)",
        role: Some("viewer"),
        body: None,
        answer: Answer::Events,
    },
    Operation {
        method: "get",
        path: "/metrics",
        summary: "Prometheus metrics",
        role: Some("viewer"),
        body: None,
        answer: Answer::Text,
    },
    Operation {
        method: "get",
        path: "/audit",
        summary: "Audit log entries, newest first (query: action, limit)",
        role: Some("admin"),
        body: None,
        answer: Answer::Json("[AuditEntry]"),
    },
    Operation {
        method: "get",
        path: "/audit/verify",
        summary: "Check the audit log's hash chain",
        role: Some("admin"),
        body: None,
        answer: Answer::Json("AuditReport"),
    },
    Operation {
        method: "get",
        path: "/auth/tokens",
        summary: "Every token's id, name, role and creation time (never a secret)",
        role: Some("admin"),
        body: None,
        answer: Answer::Json("[TokenSummary]"),
    },
    Operation {
        method: "post",
        path: "/auth/tokens",
        summary: "Make a token ({name, role}); its secret is shown once",
        role: Some("admin"),
        body: Some("NewToken"),
        answer: Answer::Json("CreatedToken"),
    },
    Operation {
        method: "delete",
        path: "/auth/tokens/{id}",
        summary: "Revoke a token at once (409 for the last admin token)",
        role: Some("admin"),
        body: None,
        answer: Answer::Json("TokenSummary"),
    },
];

/// A link from an operation's 201 answer to another operation (schemathesis's stateful
/// phase follows them): `(method, path, link name, target method, target path, the
/// answer's field that fills the target's `id`)`.
type Link = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

const LINKS: &[Link] = &[
    (
        "post",
        "/workflows/servers/create",
        "GetWorkflow",
        "get",
        "/tasks/{id}",
        "/task_id",
    ),
    (
        "post",
        "/workflows/taskserv/create",
        "GetWorkflow",
        "get",
        "/tasks/{id}",
        "/task_id",
    ),
    (
        "post",
        "/workflows/cluster/create",
        "GetWorkflow",
        "get",
        "/tasks/{id}",
        "/task_id",
    ),
    (
        "post",
        "/extensions/taskservs/install",
        "GetWorkflow",
        "get",
        "/tasks/{id}",
        "/task_id",
    ),
    (
        "post",
        "/test/environments/create",
        "GetEnvironment",
        "get",
        "/test/environments/{id}",
        "/id",
    ),
    (
        "post",
        "/test/environments/create",
        "RunEnvironment",
        "post",
        "/test/environments/{id}/run",
        "/id",
    ),
    (
        "post",
        "/test/environments/create",
        "EnvironmentLogs",
        "get",
        "/test/environments/{id}/logs",
        "/id",
    ),
    (
        "post",
        "/test/environments/create",
        "DeleteEnvironment",
        "delete",
        "/test/environments/{id}",
        "/id",
    ),
    (
        "post",
        "/auth/tokens",
        "RevokeToken",
        "delete",
        "/auth/tokens/{id}",
        "/id",
    ),
];

/// The document.
pub fn document() -> Value {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let mut schemas = Map::new();
    let mut add = |name: &str, schema: schemars::Schema| {
        schemas.insert(name.to_string(), schema.to_value());
    };
    add("HealthReport", generator.subschema_for::<HealthReport>());
    add("Task", generator.subschema_for::<Task>());
    add(
        "ServersRequest",
        generator.subschema_for::<ServersRequest>(),
    );
    add(
        "TaskservRequest",
        generator.subschema_for::<TaskservRequest>(),
    );
    add(
        "ClusterRequest",
        generator.subschema_for::<ClusterRequest>(),
    );
    add("EnvRequest", generator.subschema_for::<EnvRequest>());
    add("TestEnv", generator.subschema_for::<TestEnv>());
    add("WorkflowView", generator.subschema_for::<WorkflowView>());
    add(
        "WorkflowSummary",
        generator.subschema_for::<WorkflowSummary>(),
    );
    add("WorkflowPlan", generator.subschema_for::<WorkflowPlan>());
    add(
        "ExtensionsReport",
        generator.subschema_for::<ExtensionsReport>(),
    );
    add("AuditEntry", generator.subschema_for::<AuditEntry>());
    add("AuditReport", generator.subschema_for::<AuditReport>());
    add("TokenSummary", generator.subschema_for::<TokenSummary>());
    let mut components: Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    // The named schemas above are references into the definitions; keep the definitions.
    for (name, schema) in schemas {
        components.entry(name).or_insert(schema);
    }
    components.insert("WorkflowSubmission".into(), json!({
        "type": "object",
        "properties": {
            "task_id": {"type": "integer", "description": "The workflow's id (GET /tasks/{id} shows it)"},
            "status": {"type": "string"},
            "workflow": {"$ref": "#/components/schemas/WorkflowSummary"},
            "check_mode": {"type": "boolean"},
            "plan": {"$ref": "#/components/schemas/WorkflowPlan"}
        }
    }));
    components.insert("NewToken".into(), json!({
        "type": "object", "additionalProperties": false, "required": ["name", "role"],
        "properties": {"name": {"type": "string", "minLength": 1}, "role": {"enum": ["viewer", "operator", "admin"]}}
    }));
    components.insert(
        "CreatedToken".into(),
        json!({
            "type": "object", "required": ["id", "name", "role", "token"],
            "properties": {
                "id": {"type": "string"}, "name": {"type": "string"},
                "role": {"enum": ["viewer", "operator", "admin"]},
                "created_at": {"type": "string", "format": "date-time"},
                "token": {"type": "string", "description": "The secret, shown only here"}}
        }),
    );
    components.insert("Object".into(), json!({"type": "object"}));
    components.insert("Error".into(), json!({
        "type": "object", "required": ["error"],
        "properties": {"error": {"type": "object", "required": ["kind", "message"], "properties": {
            "kind": {"type": "string"}, "message": {"type": "string"}, "field": {"type": "string"}}}}
    }));
    let mut paths = Map::new();
    for op in OPERATIONS {
        let entry = paths.entry(op.path).or_insert_with(|| json!({}));
        entry[op.method] = operation(op);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "provisioning-orchestrator",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The orchestrator's REST shim (`--port`): the same operations as the Unix socket. Every route but /health and /openapi.json needs `Authorization: Bearer <token>` (tokens.json in the data directory) with the role named in the operation's `x-role`."
        },
        "servers": [{"url": "http://127.0.0.1:8080"}],
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}
        },
        "paths": paths,
    })
}

fn reference(name: &str) -> Value {
    match name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        Some(item) => json!({"type": "array", "items": reference(item)}),
        None => json!({"$ref": format!("#/components/schemas/{name}")}),
    }
}

fn operation(op: &Operation) -> Value {
    let mut value =
        json!({ "summary": op.summary, "operationId": operation_id(op.method, op.path) });
    let error = json!({"description": "An error, named", "content": {"application/json": {"schema": reference("Error")}}});
    let mut responses = Map::new();
    let content = match op.answer {
        Answer::Json(name) => json!({"application/json": {"schema": reference(name)}}),
        Answer::Text => json!({"text/plain": {"schema": {"type": "string"}}}),
        Answer::Events => json!({"text/event-stream": {"schema": {"type": "string"}}}),
    };
    let success = if op.method == "post" && op.body.is_some() {
        "201"
    } else {
        "200"
    };
    let mut done = json!({"description": "Done", "content": content});
    let links = links(op);
    if !links.is_empty() {
        done["links"] = Value::Object(links);
    }
    responses.insert(success.into(), done);
    if success == "201" {
        responses.insert(
            "200".into(),
            json!({"description": "Check mode: the plan", "content": content}),
        );
    }
    let mut codes = vec!["404", "503"];
    if op.role.is_some() {
        codes.extend(["401", "403"]);
    }
    if op.body.is_some() {
        codes.extend(["400", "409", "413", "422"]);
    }
    if op.path.contains("{id}") {
        codes.extend(["400", "409"]);
    }
    for code in codes {
        responses.insert(code.into(), error.clone());
    }
    value["responses"] = Value::Object(responses);
    if let Some(role) = op.role {
        value["security"] = json!([{"bearer": []}]);
        value["x-role"] = json!(role);
    }
    if let Some(body) = op.body {
        value["requestBody"] =
            json!({"required": true, "content": {"application/json": {"schema": reference(body)}}});
    }
    if op.path.contains("{id}") {
        value["parameters"] =
            json!([{"name": "id", "in": "path", "required": true, "schema": id_schema(op.path)}]);
    }
    value
}

/// The schema of a path's `{id}`: a token's hex id, or a task/workflow/environment number.
fn id_schema(path: &str) -> Value {
    if path.starts_with("/auth/tokens/") {
        json!({"type": "string", "pattern": "^[0-9a-f]{16}$"})
    } else {
        json!({"type": "integer", "format": "int64", "minimum": 0})
    }
}

/// A unique name for an operation: its method and path in camel case
/// (`get /tasks/{id}` → `getTasksById`).
fn operation_id(method: &str, path: &str) -> String {
    let mut id = method.to_string();
    for part in path.split(['/', '.', '-', '_']).filter(|p| !p.is_empty()) {
        let part = match part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
            Some(param) => format!("by_{param}"),
            None => part.to_string(),
        };
        for word in part.split('_') {
            let mut chars = word.chars();
            if let Some(first) = chars.next() {
                id.push(first.to_ascii_uppercase());
                id.extend(chars);
            }
        }
    }
    id
}

/// The links of an operation's success answer ([`LINKS`]).
fn links(op: &Operation) -> Map<String, Value> {
    let mut links = Map::new();
    for (method, path, name, target_method, target_path, field) in LINKS {
        if *method == op.method && *path == op.path {
            links.insert(
                name.to_string(),
                json!({
                    "operationId": operation_id(target_method, target_path),
                    "parameters": {"id": format!("$response.body#{field}")}
                }),
            );
        }
    }
    links
}

#[cfg(test)]
mod tests {
    /// Every link names an operation of the document, and operation ids are unique.
    #[test]
    fn links_point_at_operations_and_operation_ids_are_unique() {
        let ids: Vec<String> = super::OPERATIONS
            .iter()
            .map(|op| super::operation_id(op.method, op.path))
            .collect();
        let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len(), "{ids:?}");
        for (method, path, _, target_method, target_path, _) in super::LINKS {
            for (m, p) in [(method, path), (target_method, target_path)] {
                assert!(
                    super::OPERATIONS
                        .iter()
                        .any(|op| op.method == *m && op.path == *p),
                    "{m} {p} is not an operation"
                );
            }
        }
    }

    /// The copy in docs/ must be the generated document (regenerate with
    /// `UPDATE_OPENAPI=1 cargo test -p provisioning-orchestrator openapi`).
    #[test]
    fn the_openapi_document_in_docs_is_the_generated_one() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json");
        let generated = serde_json::to_string_pretty(&super::document()).unwrap() + "\n";
        if std::env::var_os("UPDATE_OPENAPI").is_some() {
            std::fs::write(path, &generated).unwrap();
        }
        let kept = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            kept == generated,
            "docs/openapi.json differs from the document the code generates: regenerate it with UPDATE_OPENAPI=1 cargo test -p provisioning-orchestrator openapi"
        );
    }
}
