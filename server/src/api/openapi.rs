//! The OpenAPI 3.1 document at `/api/openapi.json`: every route, its parameters, bodies,
//! answers and security. The schemas are generated from the `shared` types (their
//! `schemars` derives, with the bounds of `shared::validation`); a test checks that the
//! document names exactly the routes the router serves, and the API tests check every answer
//! they get against it.

use axum::Json;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Value, json};
use shared::api::{ApiErrorBody, Heartbeat, Info, List, WatchEvent, paths};
use shared::limits::MAX_GRACE_SECONDS;
use shared::model::{Binding, ConfigMap, Deployment, Event, Kind, Lease, Namespace, Node, Pod, ReplicaSet, Scale, Secret, Service};

use crate::query::DRY_RUN_ALL;

/// One operation: method, path, summary, request body schema, success statuses and answer.
struct Op {
    method: &'static str,
    path: String,
    summary: String,
    body: Option<Value>,
    statuses: &'static [&'static str],
    answer: Answer,
}

enum Answer {
    /// JSON of this schema.
    Json(Value),
    /// A list as JSON of this schema, or with `watch=true` a stream of watch events.
    List(Value),
    Text,
    /// The OpenMetrics text of `/metrics`.
    Metrics,
    /// 101: the connection becomes a WebSocket session (`v5.channel.k8s.io`).
    Upgrade,
}

/// What an operation may answer besides success.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Errors {
    Read,
    List,
    Write,
    /// Proxied to a node's agent, which may fail (502).
    Agent,
}

const NAMESPACED: [Kind; 7] = [Kind::Pod, Kind::Deployment, Kind::ReplicaSet, Kind::Service, Kind::ConfigMap, Kind::Secret, Kind::Event];
const CLUSTER: [Kind; 2] = [Kind::Node, Kind::Namespace];

/// The schema references of a kind: one object and its list.
fn kind_schemas(generator: &mut SchemaGenerator, kind: Kind) -> (Value, Value) {
    fn refs<T: schemars::JsonSchema>(generator: &mut SchemaGenerator) -> (Value, Value) {
        (generator.subschema_for::<T>().to_value(), generator.subschema_for::<List<T>>().to_value())
    }
    match kind {
        Kind::Pod => refs::<Pod>(generator),
        Kind::Deployment => refs::<Deployment>(generator),
        Kind::ReplicaSet => refs::<ReplicaSet>(generator),
        Kind::Service => refs::<Service>(generator),
        Kind::Node => refs::<Node>(generator),
        Kind::Event => refs::<Event>(generator),
        Kind::Namespace => refs::<Namespace>(generator),
        Kind::Lease => refs::<Lease>(generator),
        Kind::ConfigMap => refs::<ConfigMap>(generator),
        Kind::Secret => refs::<Secret>(generator),
    }
}

/// Whether an operation is the create or replace of an object, which also takes a YAML body
/// (`extract::ObjectBody`); a lease's PUT is its renewal, which takes JSON only.
fn takes_yaml(method: &str, path: &str) -> bool {
    let segments: Vec<&str> = path.trim_start_matches("/api/v1/").split('/').collect();
    let object_route = match segments.as_slice() {
        [plural] | ["namespaces", "{namespace}", plural] => method == "post" && *plural != "leases",
        [plural, "{name}"] | ["namespaces", "{namespace}", plural, "{name}"] => method == "put" && *plural != "leases",
        _ => false,
    };
    path.starts_with("/api/v1/") && object_route
}

/// A create answers 201; registering a known node and repeating an event answer 200 with
/// the updated object.
fn created_statuses(kind: Kind) -> &'static [&'static str] {
    if matches!(kind, Kind::Node | Kind::Event) { &["201", "200"] } else { &["201"] }
}

fn operations(generator: &mut SchemaGenerator) -> Vec<Op> {
    let op = |method, path: &str, summary: String, body, statuses, answer| Op {
        method,
        path: path.to_string(),
        summary,
        body,
        statuses,
        answer,
    };
    let info = generator.subschema_for::<Info>().to_value();
    let mut ops = vec![
        op("get", "/healthz", "Liveness: \"ok\" while the process serves.".into(), None, &["200"], Answer::Text),
        op("get", "/readyz", "Readiness: \"ok\", 503 once shutdown has begun.".into(), None, &["200"], Answer::Text),
        op("get", "/metrics", "Prometheus metrics: request, scheduling and pod start latencies.".into(), None, &["200"], Answer::Metrics),
        op("get", "/api/openapi.json", "This document.".into(), None, &["200"], Answer::Json(json!({"type": "object"}))),
        op(
            "get",
            "/api/v1/info",
            "Server name, version, store, revision, counts and cluster id.".into(),
            None,
            &["200"],
            Answer::Json(info),
        ),
    ];
    for kind in NAMESPACED {
        let (plural, name) = (kind.plural(), kind.as_str());
        let (object, list) = kind_schemas(generator, kind);
        let created = created_statuses(kind);
        ops.push(op(
            "get",
            &format!("/api/v1/{plural}"),
            format!("List or watch {plural} in every namespace."),
            None,
            &["200"],
            Answer::List(list.clone()),
        ));
        ops.push(op(
            "post",
            &format!("/api/v1/{plural}"),
            format!("Create a {name} in the namespace of its metadata (default: \"default\")."),
            Some(object.clone()),
            created,
            Answer::Json(object.clone()),
        ));
        let collection = format!("/api/v1/namespaces/{{namespace}}/{plural}");
        ops.push(op("get", &collection, format!("List or watch {plural} in one namespace."), None, &["200"], Answer::List(list)));
        ops.push(op("post", &collection, format!("Create a {name}."), Some(object.clone()), created, Answer::Json(object.clone())));
        let item = format!("{collection}/{{name}}");
        ops.push(op("get", &item, format!("Read a {name}."), None, &["200"], Answer::Json(object.clone())));
        ops.push(op(
            "put",
            &item,
            format!("Replace a {name}'s editable fields; a non-zero metadata.resource_version must match (else 409)."),
            Some(object.clone()),
            &["200"],
            Answer::Json(object.clone()),
        ));
        let delete = if kind == Kind::Pod {
            "Delete a pod gracefully. A pod bound to a Ready node is marked terminating: the 200 answer carries \
             metadata.deletion_timestamp (now) and deletion_grace_period_seconds, watchers see MODIFIED and the pod \
             shows as Terminating until its node's agent has stopped the containers and confirms with \
             grace_period_seconds=0 (then DELETED). An unbound or finished pod, a pod whose node is gone or not Ready, \
             or grace_period_seconds=0 removes the pod at once and answers its last state. On a terminating pod a \
             shorter grace shortens it and a longer one changes nothing."
                .to_string()
        } else {
            format!("Delete a {name}; answers the deleted object.")
        };
        ops.push(op("delete", &item, delete, None, &["200"], Answer::Json(object)));
    }
    for kind in CLUSTER {
        let (plural, name) = (kind.plural(), kind.as_str());
        let (object, list) = kind_schemas(generator, kind);
        let collection = format!("/api/v1/{plural}");
        ops.push(op("get", &collection, format!("List or watch {plural}."), None, &["200"], Answer::List(list)));
        let create = if kind == Kind::Node {
            "Register a node: create it (201), or update what the agent owns and keep cordon and taints (200).".to_string()
        } else {
            format!("Create a {name}.")
        };
        ops.push(op("post", &collection, create, Some(object.clone()), created_statuses(kind), Answer::Json(object.clone())));
        let item = format!("{collection}/{{name}}");
        ops.push(op("get", &item, format!("Read a {name}."), None, &["200"], Answer::Json(object.clone())));
        ops.push(op(
            "put",
            &item,
            format!("Replace a {name}'s editable fields (CAS on resource_version)."),
            Some(object.clone()),
            &["200"],
            Answer::Json(object.clone()),
        ));
        ops.push(op("delete", &item, format!("Delete a {name}."), None, &["200"], Answer::Json(object)));
    }
    let pod = generator.subschema_for::<Pod>().to_value();
    let node = generator.subschema_for::<Node>().to_value();
    let scale = generator.subschema_for::<Scale>().to_value();
    let binding = generator.subschema_for::<Binding>().to_value();
    let heartbeat = generator.subschema_for::<Heartbeat>().to_value();
    let (lease, leases) = kind_schemas(generator, Kind::Lease);
    let path = "/api/v1/namespaces/{namespace}/pods/{name}";
    ops.extend([
        op(
            "post",
            shared::api::paths::MANIFESTS_PARSE,
            "Read a manifest without storing it: JSON, or YAML sent as application/yaml, several documents. Answers \
             {\"items\": [objects]}, or 400 with the line and column of the problem."
                .into(),
            Some(json!({"type": "string"})),
            &["200"],
            Answer::Json(json!({"type": "object", "properties": {"items": {"type": "array", "items": {"type": "object"}}}})),
        ),
        op(
            "post",
            &format!("{path}/binding"),
            "Bind the pod to a node: only if its node_name is still empty and the node has room, else 409.".into(),
            Some(binding),
            &["201"],
            Answer::Json(pod.clone()),
        ),
        op("get", &format!("{path}/status"), "Read the pod (its status).".into(), None, &["200"], Answer::Json(pod.clone())),
        op(
            "put",
            &format!("{path}/status"),
            "Replace the pod's status (only `status` of the body is taken; CAS when resource_version is non-zero).".into(),
            Some(pod.clone()),
            &["200"],
            Answer::Json(pod),
        ),
        op(
            "get",
            &format!("{path}/scheduling"),
            "The scheduler's last decision for the pod: every node's filter verdicts and scores.".into(),
            None,
            &["200"],
            Answer::Json(generator.subschema_for::<shared::scheduler::Explanation>().to_value()),
        ),
        op(
            "get",
            &format!("{path}/log"),
            "The pod's container log, streamed from its node's agent (`container`, `tail`, `follow`).".into(),
            None,
            &["200"],
            Answer::Text,
        ),
        op(
            "get",
            &format!("{path}/exec"),
            "Run a command in one of the pod's containers: a WebSocket session (v5.channel.k8s.io) with its node's agent.".into(),
            None,
            &["101"],
            Answer::Upgrade,
        ),
        op(
            "post",
            &format!("{path}/exec"),
            "As GET: the method of clients that upgrade with POST.".into(),
            None,
            &["101"],
            Answer::Upgrade,
        ),
        op(
            "get",
            &format!("{path}/attach"),
            "Join the streams of a container's own process: a WebSocket session (v5.channel.k8s.io) with its node's agent.".into(),
            None,
            &["101"],
            Answer::Upgrade,
        ),
        op(
            "post",
            &format!("{path}/attach"),
            "As GET: the method of clients that upgrade with POST.".into(),
            None,
            &["101"],
            Answer::Upgrade,
        ),
        op(
            "get",
            &format!("{path}/portforward"),
            "Forward connections to the pod's ports: a WebSocket (SPDY/3.1+portforward.k8s.io) with its node's agent, which connects inside the pod's network namespace.".into(),
            None,
            &["101"],
            Answer::Upgrade,
        ),
        op(
            "post",
            &format!("{path}/portforward"),
            "As GET: the method of clients that upgrade with POST.".into(),
            None,
            &["101"],
            Answer::Upgrade,
        ),
        op(
            "get",
            "/api/v1/namespaces/{namespace}/deployments/{name}/scale",
            "Read a deployment's scale.".into(),
            None,
            &["200"],
            Answer::Json(scale.clone()),
        ),
        op(
            "put",
            "/api/v1/namespaces/{namespace}/deployments/{name}/scale",
            "Set a deployment's replicas.".into(),
            Some(scale.clone()),
            &["200"],
            Answer::Json(scale.clone()),
        ),
        op(
            "get",
            "/api/v1/namespaces/{namespace}/replicasets/{name}/scale",
            "Read a ReplicaSet's scale.".into(),
            None,
            &["200"],
            Answer::Json(scale.clone()),
        ),
        op(
            "put",
            "/api/v1/namespaces/{namespace}/replicasets/{name}/scale",
            "Set a ReplicaSet's replicas.".into(),
            Some(scale.clone()),
            &["200"],
            Answer::Json(scale),
        ),
        op(
            "post",
            "/api/v1/nodes/{name}/heartbeat",
            "The agent's status heartbeat, sent when its status changed or every few minutes: stamps \
             last_heartbeat, sets conditions and capacity (a Node write). The body is optional. The frequent \
             proof of life is the lease renewal, PUT /api/v1/leases/{name}."
                .into(),
            Some(heartbeat),
            &["200"],
            Answer::Json(node.clone()),
        ),
        op("get", "/api/v1/leases", "List or watch the nodes' leases.".into(), None, &["200"], Answer::List(leases)),
        op("get", "/api/v1/leases/{name}", "Read a node's lease.".into(), None, &["200"], Answer::Json(lease.clone())),
        op(
            "put",
            "/api/v1/leases/{name}",
            "Renew node {name}'s lease: the agent's heartbeat every few seconds, a write of the Lease alone \
             (Node watchers see nothing). The body may be empty or a Lease naming that node; the server stamps \
             spec.renew_time with its clock and spec.lease_duration_seconds with its node monitor grace. A node's \
             token may renew only its own lease. 404 when the node does not exist: register it again."
                .into(),
            Some(lease.clone()),
            &["200"],
            Answer::Json(lease),
        ),
        op("get", "/api/v1/nodes/{name}/status", "Read the node (its status).".into(), None, &["200"], Answer::Json(node.clone())),
        op(
            "put",
            "/api/v1/nodes/{name}/status",
            "Replace the node's status, keeping cordon and taints.".into(),
            Some(node.clone()),
            &["200"],
            Answer::Json(node.clone()),
        ),
        op("post", "/api/v1/nodes/{name}/cordon", "Mark the node unschedulable.".into(), None, &["200"], Answer::Json(node.clone())),
        op("post", "/api/v1/nodes/{name}/uncordon", "Mark the node schedulable again.".into(), None, &["200"], Answer::Json(node)),
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

fn revision_schema() -> Value {
    json!({"type": "integer", "minimum": 0, "maximum": u64::MAX})
}

fn list_parameters() -> Vec<Value> {
    vec![
        json!({"name": "label_selector", "in": "query", "schema": {"type": "string"},
               "description": "e.g. app=web,tier!=db,env in (prod,staging),!legacy"}),
        json!({"name": "field_selector", "in": "query", "schema": {"type": "string"},
               "description": "e.g. spec.node_name=node-1 or status.phase=Running"}),
        json!({"name": "watch", "in": "query", "schema": {"type": "boolean"},
               "description": "stream changes as Server-Sent Events (ADDED, MODIFIED, DELETED, BOOKMARK)"}),
        json!({"name": "resource_version", "in": "query", "schema": revision_schema(),
               "description": "with watch: replay every change after this revision; 410 Gone when it is older than the history"}),
        json!({"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": usize::MAX},
               "description": "the most objects a page holds (0: all); while more follow, the list's continue is the next page's token"}),
        json!({"name": "continue", "in": "query", "schema": {"type": "string"},
               "description": "the previous page's continue token: the page is read at the first page's resource_version; \
                               410 Expired once the history no longer reaches it, 400 for a token this server did not issue"}),
    ]
}

fn pod_delete_parameters() -> Vec<Value> {
    vec![
        json!({"name": "grace_period_seconds", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": MAX_GRACE_SECONDS},
               "description": "seconds the containers get to stop (default: the pod's spec.termination_grace_period_seconds, \
                               else 30); 0 removes the pod at once; outside 0 to a year is a 400"}),
        json!({"name": "uid", "in": "query", "schema": {"type": "string"},
               "description": "delete only the pod with this metadata.uid, else 409 (never a newer pod of the same name)"}),
    ]
}

fn log_parameters() -> Vec<Value> {
    vec![
        json!({"name": "container", "in": "query", "schema": {"type": "string"}}),
        json!({"name": "tail", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": u64::MAX}}),
        json!({"name": "follow", "in": "query", "schema": {"type": "boolean"}}),
    ]
}

/// A session's query (`shared::remote_command::Options`).
fn session_parameters() -> Vec<Value> {
    let flag = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "boolean"}});
    vec![
        json!({"name": "command", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}, "explode": true,
               "description": "exec: the program and its arguments, one `command=` each"}),
        json!({"name": "container", "in": "query", "schema": {"type": "string"}}),
        flag("stdin"),
        flag("stdout"),
        flag("stderr"),
        flag("tty"),
    ]
}

/// The error answers of an operation, each in the one error shape.
fn error_responses(errors: Errors, error: &Value) -> serde_json::Map<String, Value> {
    let mut codes = vec!["400", "401", "403", "404", "408", "500", "503"];
    match errors {
        Errors::Read => {}
        Errors::List => codes.push("410"),
        Errors::Write => codes.extend(["409", "413", "415", "422"]),
        Errors::Agent => codes.push("502"),
    }
    let answer = json!({"description": "an error", "content": {"application/json": {"schema": error}}});
    codes.into_iter().map(|code| (code.to_string(), answer.clone())).collect()
}

/// Builds the document.
pub fn document() -> Value {
    let mut generator = SchemaSettings::draft2020_12().with(|s| s.definitions_path = "/components/schemas".into()).into_generator();
    let error = generator.subschema_for::<ApiErrorBody>().to_value();
    // Not answered as JSON (it is the `data:` of each SSE message), but documented.
    let watch_event = generator.subschema_for::<WatchEvent>().to_value();
    let mut paths = serde_json::Map::new();
    for op in operations(&mut generator) {
        let mut parameters = path_parameters(&op.path);
        let mut errors = if op.method == "get" { Errors::Read } else { Errors::Write };
        if matches!(op.answer, Answer::List(_)) {
            parameters.extend(list_parameters());
            errors = Errors::List;
        }
        if op.method == "delete" {
            parameters.push(json!({"name": "resource_version", "in": "query", "schema": revision_schema(),
                                   "description": "delete only if the object is still at this revision, else 409"}));
            if op.path.starts_with("/api/v1/namespaces/{namespace}/pods/") {
                parameters.extend(pod_delete_parameters());
            }
        }
        if op.method != "get" && op.path != paths::MANIFESTS_PARSE {
            parameters.push(json!({"name": "dry_run", "in": "query", "schema": {"type": "string", "enum": [DRY_RUN_ALL]},
                                   "description": "All: the write is checked and answered as a real one, and nothing is stored"}));
        }
        if op.path.ends_with("/log") {
            parameters.extend(log_parameters());
            errors = Errors::Agent;
        }
        if matches!(op.answer, Answer::Upgrade) {
            parameters.extend(session_parameters());
            errors = Errors::Agent;
        }
        let content = match op.answer {
            Answer::Json(schema) => json!({"application/json": {"schema": schema}}),
            Answer::List(schema) => json!({
                "application/json": {"schema": schema},
                "text/event-stream": {"schema": {"type": "string",
                    "description": "Server-Sent Events; each data line is a WatchEvent", "contentSchema": watch_event.clone()}}
            }),
            Answer::Text => json!({"text/plain": {"schema": {"type": "string"}}}),
            Answer::Metrics => json!({"application/openmetrics-text": {"schema": {"type": "string"}}}),
            Answer::Upgrade => json!({}),
        };
        let mut responses = error_responses(errors, &error);
        for status in op.statuses {
            responses.insert(status.to_string(), json!({"description": "success", "content": content}));
        }
        let mut operation = json!({"summary": op.summary, "parameters": parameters, "responses": responses});
        if let Some(body) = op.body {
            // A heartbeat and a lease renewal may come without a body; every other write needs one.
            let required = !op.path.ends_with("/heartbeat") && !op.path.starts_with("/api/v1/leases/");
            let mut content = json!({"application/json": {"schema": body}});
            if takes_yaml(op.method, &op.path) {
                content["application/yaml"] = json!({"schema": body});
            }
            operation["requestBody"] = json!({"required": required, "content": content});
        }
        if op.path == "/healthz" || op.path == "/readyz" {
            operation["security"] = json!([]);
        }
        paths.entry(op.path.clone()).or_insert_with(|| json!({}))[op.method] = operation;
    }
    json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "Shepherd API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The Shepherd control plane. Objects use snake_case fields, memory in bytes and CPU in millicores. \
                Every error is {\"error\": {code, reason, message, details}}. Send Authorization: Bearer <token> when the server \
                has tokens. A server without tokens answers only requests for its own loopback address, from no other site's \
                page, and takes a POST only with Content-Type: application/json (or application/yaml) or the X-Shepherd-Client \
                header."
        },
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": generator.take_definitions(true)
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
    fn the_document_constrains_what_it_describes() {
        let doc = document();
        let schemas = &doc["components"]["schemas"];
        for kind in ["Pod", "Node", "Deployment", "Service", "Event", "Namespace", "Binding", "Scale", "Heartbeat", "Info"] {
            assert!(schemas[kind]["properties"].as_object().is_some_and(|p| !p.is_empty()), "{kind} has no properties");
        }
        assert_eq!(schemas["Info"]["properties"]["cluster_id"]["type"], "string");
        let cpu = &schemas["ResourceRequirements"]["properties"]["cpu"]["anyOf"][0];
        assert_eq!((&cpu["minimum"], &cpu["maximum"]), (&json!(0), &json!(shared::limits::MAX_CPU_MILLICORES)));
        assert_eq!(schemas["NodeResources"]["properties"]["pods"]["maximum"], json!(shared::limits::MAX_NODE_PODS));
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let open = path == "/healthz" || path == "/readyz";
                assert_eq!(operation.get("security") == Some(&json!([])), open, "{method} {path}: only the probes need no token");
                for parameter in operation["parameters"].as_array().unwrap() {
                    if parameter["schema"]["type"] == "integer" {
                        assert_eq!(parameter["schema"]["minimum"], 0, "{method} {path} ?{}", parameter["name"]);
                        assert!(parameter["schema"]["maximum"].is_number(), "{method} {path} ?{}", parameter["name"]);
                    }
                }
            }
        }
    }

    #[test]
    fn only_creates_and_replaces_of_objects_document_a_yaml_body() {
        let doc = document();
        let yaml = |path: &str, method: &str| doc["paths"][path][method]["requestBody"]["content"].get("application/yaml").is_some();
        assert!(yaml("/api/v1/pods", "post") && yaml("/api/v1/namespaces/{namespace}/pods", "post"));
        assert!(yaml("/api/v1/namespaces/{namespace}/deployments/{name}", "put") && yaml("/api/v1/nodes/{name}", "put"));
        assert!(!yaml("/api/v1/leases/{name}", "put"), "a renewal takes JSON");
        assert!(!yaml("/api/v1/namespaces/{namespace}/pods/{name}/status", "put"));
        assert!(!yaml("/api/v1/namespaces/{namespace}/pods/{name}/binding", "post"));
        let documented = doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|methods| methods.as_object().unwrap().values())
            .filter(|op| op["requestBody"]["content"].get("application/yaml").is_some())
            .count();
        assert_eq!(documented, 25, "seven namespaced kinds' two creates and replace, two cluster kinds' create and replace");
    }

    #[test]
    fn every_delete_documents_its_compare_and_swap_parameter() {
        let doc = document();
        let deletes: Vec<_> =
            doc["paths"].as_object().unwrap().iter().filter_map(|(path, entry)| Some((path, entry.get("delete")?))).collect();
        assert_eq!(deletes.len(), 9, "one DELETE per kind");
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
