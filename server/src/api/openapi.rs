//! The OpenAPI 3.1 document at `/api/openapi.json`: every route, its parameters, bodies and
//! answers. It is written out here by hand; a test checks that it names exactly the routes
//! the router serves.

use axum::Json;
use serde_json::{Value, json};

/// One operation: method, path, summary, request body schema, success status and schema.
struct Op {
    method: &'static str,
    path: String,
    summary: String,
    body: Option<&'static str>,
    status: &'static str,
    answer: Answer,
}

enum Answer {
    Schema(&'static str),
    ListOf(&'static str),
    Text,
    Stream,
}

const NAMESPACED: [(&str, &str); 4] = [("pods", "Pod"), ("deployments", "Deployment"), ("services", "Service"), ("events", "Event")];
const CLUSTER: [(&str, &str); 2] = [("nodes", "Node"), ("namespaces", "Namespace")];

fn operations() -> Vec<Op> {
    let op =
        |method, path: &str, summary: String, body, status, answer| Op { method, path: path.to_string(), summary, body, status, answer };
    let mut ops = vec![
        op("get", "/healthz", "Liveness: \"ok\" while the process serves.".into(), None, "200", Answer::Text),
        op("get", "/readyz", "Readiness: \"ok\", 503 once shutdown has begun.".into(), None, "200", Answer::Text),
        op("get", "/metrics", "Prometheus metrics: request, scheduling and pod start latencies.".into(), None, "200", Answer::Text),
        op("get", "/api/openapi.json", "This document.".into(), None, "200", Answer::Schema("Any")),
        op("get", "/api/v1/info", "Server name, version, store, revision and counts.".into(), None, "200", Answer::Schema("Info")),
    ];
    for (plural, kind) in NAMESPACED {
        ops.push(op(
            "get",
            &format!("/api/v1/{plural}"),
            format!("List or watch {plural} in every namespace."),
            None,
            "200",
            Answer::ListOf(kind),
        ));
        ops.push(op(
            "post",
            &format!("/api/v1/{plural}"),
            format!("Create a {kind} in the namespace of its metadata (default: \"default\")."),
            Some(kind),
            "201",
            Answer::Schema(kind),
        ));
        let collection = format!("/api/v1/namespaces/{{namespace}}/{plural}");
        ops.push(op("get", &collection, format!("List or watch {plural} in one namespace."), None, "200", Answer::ListOf(kind)));
        ops.push(op("post", &collection, format!("Create a {kind}."), Some(kind), "201", Answer::Schema(kind)));
        let item = format!("{collection}/{{name}}");
        ops.push(op("get", &item, format!("Read a {kind}."), None, "200", Answer::Schema(kind)));
        ops.push(op(
            "put",
            &item,
            format!("Replace a {kind}'s editable fields; a non-zero metadata.resource_version must match (else 409)."),
            Some(kind),
            "200",
            Answer::Schema(kind),
        ));
        let delete = if kind == "Pod" {
            "Delete a pod gracefully. A pod bound to a Ready node is marked terminating: the 200 answer carries \
             metadata.deletion_timestamp (now) and deletion_grace_period_seconds, watchers see MODIFIED and the pod \
             shows as Terminating until its node's agent has stopped the containers and confirms with \
             grace_period_seconds=0 (then DELETED). An unbound or finished pod, a pod whose node is gone or not Ready, \
             or grace_period_seconds=0 removes the pod at once and answers its last state. On a terminating pod a \
             shorter grace shortens it and a longer one changes nothing."
                .to_string()
        } else {
            format!("Delete a {kind}; answers the deleted object.")
        };
        ops.push(op("delete", &item, delete, None, "200", Answer::Schema(kind)));
    }
    for (plural, kind) in CLUSTER {
        let collection = format!("/api/v1/{plural}");
        ops.push(op("get", &collection, format!("List or watch {plural}."), None, "200", Answer::ListOf(kind)));
        let create = if kind == "Node" {
            "Register a node: create it (201), or update what the agent owns and keep cordon and taints (200).".to_string()
        } else {
            format!("Create a {kind}.")
        };
        ops.push(op("post", &collection, create, Some(kind), "201", Answer::Schema(kind)));
        let item = format!("{collection}/{{name}}");
        ops.push(op("get", &item, format!("Read a {kind}."), None, "200", Answer::Schema(kind)));
        ops.push(op(
            "put",
            &item,
            format!("Replace a {kind}'s editable fields (CAS on resource_version)."),
            Some(kind),
            "200",
            Answer::Schema(kind),
        ));
        ops.push(op("delete", &item, format!("Delete a {kind}."), None, "200", Answer::Schema(kind)));
    }
    let pod = "/api/v1/namespaces/{namespace}/pods/{name}";
    ops.extend([
        op(
            "post",
            &format!("{pod}/binding"),
            "Bind the pod to a node: only if its node_name is still empty and the node has room, else 409.".into(),
            Some("Binding"),
            "201",
            Answer::Schema("Pod"),
        ),
        op("get", &format!("{pod}/status"), "Read the pod (its status).".into(), None, "200", Answer::Schema("Pod")),
        op(
            "put",
            &format!("{pod}/status"),
            "Replace the pod's status (only `status` of the body is taken; CAS when resource_version is non-zero).".into(),
            Some("Pod"),
            "200",
            Answer::Schema("Pod"),
        ),
        op(
            "get",
            &format!("{pod}/scheduling"),
            "The scheduler's last decision for the pod: every node's filter verdicts and scores.".into(),
            None,
            "200",
            Answer::Schema("Any"),
        ),
        op(
            "get",
            &format!("{pod}/log"),
            "The pod's container log, streamed from its node's agent (`container`, `tail`, `follow`).".into(),
            None,
            "200",
            Answer::Stream,
        ),
        op(
            "get",
            "/api/v1/namespaces/{namespace}/deployments/{name}/scale",
            "Read a deployment's scale.".into(),
            None,
            "200",
            Answer::Schema("Scale"),
        ),
        op(
            "put",
            "/api/v1/namespaces/{namespace}/deployments/{name}/scale",
            "Set a deployment's replicas.".into(),
            Some("Scale"),
            "200",
            Answer::Schema("Scale"),
        ),
        op(
            "post",
            "/api/v1/nodes/{name}/heartbeat",
            "The agent's proof of life: stamps last_heartbeat, sets conditions and capacity.".into(),
            Some("Heartbeat"),
            "200",
            Answer::Schema("Node"),
        ),
        op("get", "/api/v1/nodes/{name}/status", "Read the node (its status).".into(), None, "200", Answer::Schema("Node")),
        op(
            "put",
            "/api/v1/nodes/{name}/status",
            "Replace the node's status, keeping cordon and taints.".into(),
            Some("Node"),
            "200",
            Answer::Schema("Node"),
        ),
        op("post", "/api/v1/nodes/{name}/cordon", "Mark the node unschedulable.".into(), None, "200", Answer::Schema("Node")),
        op("post", "/api/v1/nodes/{name}/uncordon", "Mark the node schedulable again.".into(), None, "200", Answer::Schema("Node")),
    ]);
    ops
}

fn path_parameters(path: &str) -> Vec<Value> {
    ["namespace", "name"]
        .iter()
        .filter(|p| path.contains(&format!("{{{p}}}")))
        .map(|p| json!({"name": p, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect()
}

fn list_parameters() -> Vec<Value> {
    vec![
        json!({"name": "label_selector", "in": "query", "schema": {"type": "string"},
               "description": "e.g. app=web,tier!=db,env in (prod,staging),!legacy"}),
        json!({"name": "field_selector", "in": "query", "schema": {"type": "string"},
               "description": "e.g. spec.node_name=node-1 or status.phase=Running"}),
        json!({"name": "watch", "in": "query", "schema": {"type": "boolean"},
               "description": "stream changes as Server-Sent Events (ADDED, MODIFIED, DELETED, BOOKMARK)"}),
        json!({"name": "resource_version", "in": "query", "schema": {"type": "integer"},
               "description": "with watch: replay every change after this revision; 410 Gone when it is older than the history"}),
    ]
}

fn pod_delete_parameters() -> Vec<Value> {
    vec![
        json!({"name": "grace_period_seconds", "in": "query", "schema": {"type": "integer", "minimum": 0},
               "description": "seconds the containers get to stop (default: the pod's spec.termination_grace_period_seconds, \
                               else 30); 0 removes the pod at once; negative is a 400"}),
        json!({"name": "uid", "in": "query", "schema": {"type": "string"},
               "description": "delete only the pod with this metadata.uid, else 409 (never a newer pod of the same name)"}),
    ]
}

fn error_responses() -> Value {
    let error = json!({"description": "an error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ApiError"}}}});
    json!({
        "400": error, "401": error, "403": error, "404": error, "409": error, "410": error, "413": error, "422": error
    })
}

/// Builds the document.
pub fn document() -> Value {
    let mut paths = serde_json::Map::new();
    for op in operations() {
        let mut parameters = path_parameters(&op.path);
        let is_list = matches!(op.answer, Answer::ListOf(_));
        if is_list {
            parameters.extend(list_parameters());
        }
        if op.method == "delete" {
            parameters.push(json!({"name": "resource_version", "in": "query", "schema": {"type": "integer"},
                                   "description": "delete only if the object is still at this revision, else 409"}));
            if op.path.starts_with("/api/v1/namespaces/{namespace}/pods/") {
                parameters.extend(pod_delete_parameters());
            }
        }
        if op.path.ends_with("/log") {
            for (name, kind) in [("container", "string"), ("tail", "integer"), ("follow", "boolean")] {
                parameters.push(json!({"name": name, "in": "query", "schema": {"type": kind}}));
            }
        }
        let content = match &op.answer {
            Answer::Schema(s) => json!({"application/json": {"schema": {"$ref": format!("#/components/schemas/{s}")}}}),
            Answer::ListOf(s) => json!({
                "application/json": {"schema": {"type": "object", "properties": {
                    "kind": {"type": "string"}, "resource_version": {"type": "integer"},
                    "items": {"type": "array", "items": {"$ref": format!("#/components/schemas/{s}")}}}}},
                "text/event-stream": {"schema": {"$ref": "#/components/schemas/WatchEvent"}}
            }),
            Answer::Text => json!({"text/plain": {"schema": {"type": "string"}}}),
            Answer::Stream => json!({"text/plain": {"schema": {"type": "string"}}}),
        };
        let mut responses = error_responses();
        responses[op.status] = json!({"description": "success", "content": content});
        let mut operation = json!({"summary": op.summary, "parameters": parameters, "responses": responses});
        if let Some(body) = op.body {
            operation["requestBody"] =
                json!({"required": true, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{body}")}}}});
        }
        paths.entry(op.path.clone()).or_insert_with(|| json!({}))[op.method] = operation;
    }
    let object = |description: &str| json!({"type": "object", "description": description});
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Shepherd API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The Shepherd control plane. Objects use snake_case fields, memory in bytes and CPU in millicores. Every error is {\"error\": {code, reason, message, details}}. Send Authorization: Bearer <token> when the server has tokens."
        },
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Any": object("any JSON"),
                "Pod": object("kind, metadata, spec {containers, restart_policy, node_selector, tolerations, node_name}, status {phase, conditions, pod_ip, container_statuses}"),
                "Deployment": object("kind, metadata, spec {replicas, selector, template}, status {replicas, ready_replicas}"),
                "Service": object("kind, metadata, spec {selector, ports, type}, status {endpoints}"),
                "Node": object("kind, metadata, status {conditions, capacity, allocatable, last_heartbeat, unschedulable, taints}"),
                "Event": object("kind, metadata, type, reason, message, involved_object, source, count, first_timestamp, last_timestamp"),
                "Namespace": object("kind, metadata, status {phase}"),
                "Binding": object("{target: {kind: \"Node\", name}}"),
                "Scale": object("{spec: {replicas}, status: {replicas}}"),
                "Heartbeat": object("{conditions, capacity, allocatable}"),
                "Info": object("name, version, started_at, resource_version, store, auth_required, nodes, pods, scheduler_profile"),
                "WatchEvent": object("SSE message: id = resource_version, data = {type: ADDED|MODIFIED|DELETED|BOOKMARK, resource_version, object}"),
                "ApiError": {"type": "object", "properties": {"error": {"type": "object", "properties": {
                    "code": {"type": "integer"}, "reason": {"type": "string"}, "message": {"type": "string"},
                    "details": {"type": "array", "items": {"type": "object", "properties": {"field": {"type": "string"}, "message": {"type": "string"}}}}
                }}}}
            }
        },
        "security": [{"bearer": []}]
    })
}

pub async fn serve() -> Json<Value> {
    Json(document())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_names_every_route_and_method_the_router_serves_and_no_other() {
        let doc = document();
        let paths = doc["paths"].as_object().unwrap();
        let table = crate::api::route_table();
        for (path, methods) in &table {
            let entry = paths.get(path).unwrap_or_else(|| panic!("{path} is missing from the OpenAPI document"));
            for method in methods {
                let m = method.as_str().to_lowercase();
                assert!(entry.get(&m).is_some(), "{} {path} is missing from the OpenAPI document", method);
            }
            assert_eq!(entry.as_object().unwrap().len(), methods.len(), "{path} documents methods the router does not serve");
        }
        assert_eq!(paths.len(), table.len(), "the document has paths the router does not serve");
    }

    #[test]
    fn every_delete_documents_its_compare_and_swap_parameter() {
        let doc = document();
        let deletes: Vec<_> =
            doc["paths"].as_object().unwrap().iter().filter_map(|(path, entry)| Some((path, entry.get("delete")?))).collect();
        assert_eq!(deletes.len(), 6, "one DELETE per kind");
        for (path, delete) in deletes {
            let names: Vec<_> = delete["parameters"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
            assert!(names.contains(&"resource_version"), "DELETE {path} lacks ?resource_version: {names:?}");
            let pod = path == "/api/v1/namespaces/{namespace}/pods/{name}";
            for graceful in ["grace_period_seconds", "uid"] {
                assert_eq!(names.contains(&graceful), pod, "DELETE {path}: ?{graceful} is for pods only: {names:?}");
            }
            if pod {
                let summary = delete["summary"].as_str().unwrap();
                assert!(summary.contains("Terminating") && summary.contains("deletion_timestamp"), "{summary}");
            }
        }
    }
}
