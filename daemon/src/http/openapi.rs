//! The OpenAPI 3.1 document, generated from the code: the routes of the operations table
//! (the same the router serves, with their summaries, bodies, answers and roles) and JSON
//! Schemas derived from the protocol types (schemars). `docs/openapi.json` is a copy kept
//! in the repository; a test fails when they differ.

use orch_protocol::{
    AuditEntry, AuditReport, AuditSegment, ClusterRequest, EnvRequest, ExtensionsReport,
    HealthReport, ServersRequest, Task, TaskservRequest, TestEnv, WorkflowPlan, WorkflowSummary,
    WorkflowView,
};
use schemars::generate::SchemaSettings;

use serde_json::{Map, Value, json};

use super::auth::TokenSummary;
use crate::ops::{self, Answer, Method, Operation, Route, RouteId};

/// A link from a route's 201 answer to another route (schemathesis's stateful phase
/// follows them): `(route, link name, target route, the answer's field that fills the
/// target's `id`)`.
type Link = (RouteId, &'static str, RouteId, &'static str);

const LINKS: &[Link] = &[
    (
        RouteId::ServersCreate,
        "GetWorkflow",
        RouteId::Task,
        "/task_id",
    ),
    (
        RouteId::TaskservCreate,
        "GetWorkflow",
        RouteId::Task,
        "/task_id",
    ),
    (
        RouteId::ClusterCreate,
        "GetWorkflow",
        RouteId::Task,
        "/task_id",
    ),
    (
        RouteId::TaskservInstall,
        "GetWorkflow",
        RouteId::Task,
        "/task_id",
    ),
    (RouteId::EnvCreate, "GetEnvironment", RouteId::Env, "/id"),
    (RouteId::EnvCreate, "RunEnvironment", RouteId::EnvRun, "/id"),
    (
        RouteId::EnvCreate,
        "EnvironmentLogs",
        RouteId::EnvLogs,
        "/id",
    ),
    (
        RouteId::EnvCreate,
        "DeleteEnvironment",
        RouteId::EnvDelete,
        "/id",
    ),
    (
        RouteId::TokenCreate,
        "RevokeToken",
        RouteId::TokenRevoke,
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
    add(
        "ClusterView",
        generator.subschema_for::<orch_protocol::ClusterView>(),
    );
    add("Task", generator.subschema_for::<Task>());
    add(
        "Dependants",
        generator.subschema_for::<orch_protocol::Dependants>(),
    );
    add(
        "LogPage",
        generator.subschema_for::<orch_protocol::LogPage>(),
    );
    add(
        "Activity",
        generator.subschema_for::<orch_protocol::Activity>(),
    );
    add(
        "TopologiesReport",
        generator.subschema_for::<orch_protocol::TopologiesReport>(),
    );
    add(
        "Caller",
        generator.subschema_for::<super::routes::CallerView>(),
    );
    add(
        "WorkflowRestart",
        generator.subschema_for::<super::routes::WorkflowRestart>(),
    );
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
    add("AuditSegment", generator.subschema_for::<AuditSegment>());
    add("TokenSummary", generator.subschema_for::<TokenSummary>());
    add(
        "QueueView",
        generator.subschema_for::<orch_protocol::QueueView>(),
    );
    add(
        "QueueChange",
        generator.subschema_for::<orch_protocol::QueueChange>(),
    );
    add(
        "ScheduleSpec",
        generator.subschema_for::<orch_protocol::ScheduleSpec>(),
    );
    add(
        "Schedule",
        generator.subschema_for::<orch_protocol::Schedule>(),
    );
    add(
        "ScheduleView",
        generator.subschema_for::<orch_protocol::ScheduleView>(),
    );
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
    for (op, route) in ops::routes() {
        let entry = paths.entry(route.path).or_insert_with(|| json!({}));
        entry[route.method.as_str()] = operation(op, route);
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

/// A route's entry.
fn operation(op: &Operation, route: &Route) -> Value {
    let mut value = json!({ "summary": route.summary, "operationId": operation_id(route) });
    let error = json!({"description": "An error, named", "content": {"application/json": {"schema": reference("Error")}}});
    let mut responses = Map::new();
    let content = match route.answer {
        Answer::Json(name) => json!({"application/json": {"schema": reference(name)}}),
        Answer::Text => json!({"text/plain": {"schema": {"type": "string"}}}),
        Answer::Events => json!({"text/event-stream": {"schema": {"type": "string"}}}),
    };
    let success = if route.method == Method::Post && route.body.is_some() {
        "201"
    } else {
        "200"
    };
    let mut done = json!({"description": "Done", "content": content});
    let links = links(route.id);
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
    if op.access.role().is_some() {
        codes.extend(["401", "403"]);
    }
    if route.body.is_some() {
        codes.extend(["400", "409", "413", "422"]);
    }
    if route.path.contains("{id}") {
        codes.extend(["400", "409"]);
    }
    for code in codes {
        responses.insert(code.into(), error.clone());
    }
    value["responses"] = Value::Object(responses);
    if let Some(role) = op.access.role() {
        value["security"] = json!([{"bearer": []}]);
        value["x-role"] = json!(role.as_str());
    }
    if let Some(body) = route.body {
        value["requestBody"] =
            json!({"required": true, "content": {"application/json": {"schema": reference(body)}}});
    }
    if route.path.contains("{id}") {
        value["parameters"] = json!([{"name": "id", "in": "path", "required": true, "schema": id_schema(route.path)}]);
    }
    value
}

/// The schema of a path's `{id}`: a token's hex id, a schedule's name, or a
/// task/workflow/environment number.
fn id_schema(path: &str) -> Value {
    if path.starts_with("/auth/tokens/") {
        json!({"type": "string", "pattern": "^[0-9a-f]{16}$"})
    } else if path.starts_with("/schedules/") {
        json!({"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"})
    } else {
        json!({"type": "integer", "format": "int64", "minimum": 0})
    }
}

/// A unique name for a route: its method and path in camel case
/// (`get /tasks/{id}` → `getTasksById`).
fn operation_id(route: &Route) -> String {
    let mut id = route.method.as_str().to_string();
    for part in route
        .path
        .split(['/', '.', '-', '_'])
        .filter(|p| !p.is_empty())
    {
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

/// The route with this id.
fn route(id: RouteId) -> &'static Route {
    ops::routes()
        .map(|(_, route)| route)
        .find(|route| route.id == id)
        .expect("every route id is in the table (a unit test checks)")
}

/// The links of a route's success answer ([`LINKS`]).
fn links(id: RouteId) -> Map<String, Value> {
    let mut links = Map::new();
    for (from, name, target, field) in LINKS {
        if *from == id {
            links.insert(
                name.to_string(),
                json!({
                    "operationId": operation_id(route(*target)),
                    "parameters": {"id": format!("$response.body#{field}")}
                }),
            );
        }
    }
    links
}

#[cfg(test)]
mod tests {
    /// Every link joins two routes of the table, and operation ids are unique.
    #[test]
    fn links_point_at_routes_and_operation_ids_are_unique() {
        let ids: Vec<String> = crate::ops::routes()
            .map(|(_, route)| super::operation_id(route))
            .collect();
        let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len(), "{ids:?}");
        for (from, _, target, _) in super::LINKS {
            assert_eq!(super::route(*from).id, *from);
            assert_eq!(super::route(*target).id, *target);
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
