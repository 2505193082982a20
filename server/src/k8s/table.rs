//! `meta.k8s.io/v1` Table answers, which kubectl asks for to print `get`: kubectl's own
//! columns per kind, with `-o wide`'s as priority 1. The words (AGE, the pod and node STATUS)
//! are `shared::words`', the same as sheepctl and the dashboard print.

use serde_json::{Value, json};
use shared::model::Object;
use shared::words;

use super::convert::to_json;
use super::kinds::Served;
use crate::state::AppState;

/// What each row carries besides its cells (`?includeObject=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    None,
    Metadata,
    Object,
}

/// `(name, type, priority)` of each column.
fn columns(kind: Served) -> &'static [(&'static str, &'static str, u8)] {
    use shared::model::Kind;
    match kind {
        Served::Stored(Kind::Pod) => &[
            ("Name", "string", 0),
            ("Ready", "string", 0),
            ("Status", "string", 0),
            ("Restarts", "string", 0),
            ("Age", "string", 0),
            ("IP", "string", 1),
            ("Node", "string", 1),
            ("Nominated Node", "string", 1),
            ("Readiness Gates", "string", 1),
        ],
        Served::Stored(Kind::Node) => &[
            ("Name", "string", 0),
            ("Status", "string", 0),
            ("Roles", "string", 0),
            ("Age", "string", 0),
            ("Version", "string", 0),
            ("Internal-IP", "string", 1),
            ("External-IP", "string", 1),
            ("OS-Image", "string", 1),
            ("Kernel-Version", "string", 1),
            ("Container-Runtime", "string", 1),
        ],
        Served::Stored(Kind::Deployment) => &[
            ("Name", "string", 0),
            ("Ready", "string", 0),
            ("Up-to-date", "integer", 0),
            ("Available", "integer", 0),
            ("Age", "string", 0),
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        Served::Stored(Kind::ReplicaSet) => &[
            ("Name", "string", 0),
            ("Desired", "integer", 0),
            ("Current", "integer", 0),
            ("Ready", "integer", 0),
            ("Age", "string", 0),
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        Served::Stored(Kind::Service) => &[
            ("Name", "string", 0),
            ("Type", "string", 0),
            ("Cluster-IP", "string", 0),
            ("External-IP", "string", 0),
            ("Port(s)", "string", 0),
            ("Age", "string", 0),
            ("Selector", "string", 1),
        ],
        Served::Stored(Kind::Event) => &[
            ("Last Seen", "string", 0),
            ("Type", "string", 0),
            ("Reason", "string", 0),
            ("Object", "string", 0),
            ("Source", "string", 1),
            ("Message", "string", 0),
            ("First Seen", "string", 1),
            ("Count", "integer", 1),
            ("Name", "string", 1),
        ],
        Served::Stored(Kind::Namespace) => &[("Name", "string", 0), ("Status", "string", 0), ("Age", "string", 0)],
        Served::Stored(Kind::ConfigMap) => &[("Name", "string", 0), ("Data", "integer", 0), ("Age", "string", 0)],
        Served::Stored(Kind::Secret) => &[("Name", "string", 0), ("Type", "string", 0), ("Data", "integer", 0), ("Age", "string", 0)],
        Served::Endpoints => &[("Name", "string", 0), ("Endpoints", "string", 0), ("Age", "string", 0)],
        Served::EndpointSlices => {
            &[("Name", "string", 0), ("AddressType", "string", 0), ("Ports", "string", 0), ("Endpoints", "string", 0), ("Age", "string", 0)]
        }
        Served::Stored(Kind::Lease) => &[("Name", "string", 0), ("Holder", "string", 0), ("Age", "string", 0)],
    }
}

fn none_if_empty(text: &str) -> Value {
    if text.is_empty() { "<none>".into() } else { text.into() }
}

fn join_or_none(items: impl Iterator<Item = String>) -> Value {
    let joined: Vec<String> = items.collect();
    none_if_empty(&joined.join(","))
}

fn cells(kind: Served, object: &Object, state: &AppState, now: shared::model::Time) -> Vec<Value> {
    let meta = object.metadata();
    let age = words::age(now, meta.created_at);
    match (kind, object) {
        (Served::Endpoints, Object::Service(s)) => {
            let ports: Vec<i32> = s.spec.ports.iter().map(|p| p.target_port).collect();
            let addresses = s.status.endpoints.iter().flat_map(|e| ports.iter().map(move |p| format!("{}:{p}", e.ip)));
            vec![meta.name.clone().into(), join_or_none(addresses), age.into()]
        }
        (Served::EndpointSlices, Object::Service(s)) => {
            let ports = s.spec.ports.iter().map(|p| p.target_port.to_string());
            let addresses = s.status.endpoints.iter().chain(&s.status.not_ready_endpoints).map(|e| e.ip.clone());
            vec![meta.name.clone().into(), "IPv4".into(), join_or_none(ports), join_or_none(addresses), age.into()]
        }
        (_, Object::Pod(p)) => {
            let (ready, total) = p.ready_count();
            vec![
                meta.name.clone().into(),
                format!("{ready}/{total}").into(),
                p.display_status().into(),
                p.restart_count().to_string().into(),
                age.into(),
                none_if_empty(&p.status.pod_ip),
                none_if_empty(&p.spec.node_name),
                "<none>".into(),
                "<none>".into(),
            ]
        }
        (_, Object::Node(n)) => {
            let roles = meta.labels.keys().filter_map(|k| k.strip_prefix("node-role.kubernetes.io/")).map(str::to_string);
            let info = &n.status.node_info;
            let runtime = if info.runtime.is_empty() { String::new() } else { format!("{}://{}", info.runtime, info.runtime_version) };
            vec![
                meta.name.clone().into(),
                words::node_status(n, node_readiness(state, n, now)).into(),
                join_or_none(roles),
                age.into(),
                none_if_empty(&info.agent_version),
                none_if_empty(&n.status.address),
                "<none>".into(),
                none_if_empty(if info.simulated { "simulated" } else { &info.os }),
                "<unknown>".into(),
                none_if_empty(&runtime),
            ]
        }
        (_, Object::Deployment(d)) => {
            let containers = &d.spec.template.spec.containers;
            vec![
                meta.name.clone().into(),
                format!("{}/{}", d.status.ready_replicas, d.spec.replicas).into(),
                d.status.updated_replicas.into(),
                d.status.available_replicas.into(),
                age.into(),
                join_or_none(containers.iter().map(|c| c.name.clone())),
                join_or_none(containers.iter().map(|c| c.image.clone())),
                none_if_empty(&d.spec.selector.to_string()),
            ]
        }
        (_, Object::ReplicaSet(rs)) => {
            let containers = &rs.spec.template.spec.containers;
            vec![
                meta.name.clone().into(),
                rs.spec.replicas.into(),
                rs.status.replicas.into(),
                rs.status.ready_replicas.into(),
                age.into(),
                join_or_none(containers.iter().map(|c| c.name.clone())),
                join_or_none(containers.iter().map(|c| c.image.clone())),
                none_if_empty(&rs.spec.selector.to_string()),
            ]
        }
        (_, Object::Service(s)) => {
            let selector = s.spec.selector.iter().map(|(k, v)| format!("{k}={v}"));
            vec![
                meta.name.clone().into(),
                none_if_empty(&s.spec.type_),
                none_if_empty(&s.spec.cluster_ip),
                "<none>".into(),
                words::service_ports(&s.spec.ports).into(),
                age.into(),
                join_or_none(selector),
            ]
        }
        (_, Object::Event(e)) => vec![
            words::age(now, words::last_seen(e)).into(),
            e.type_.clone().into(),
            e.reason.clone().into(),
            e.involved_object.short().into(),
            none_if_empty(&e.source),
            e.message.clone().into(),
            words::age(now, words::first_seen(e)).into(),
            e.count.into(),
            meta.name.clone().into(),
        ],
        (_, Object::Namespace(n)) => vec![meta.name.clone().into(), none_if_empty(&n.status.phase), age.into()],
        (_, Object::ConfigMap(c)) => vec![meta.name.clone().into(), c.len().into(), age.into()],
        (_, Object::Secret(s)) => vec![meta.name.clone().into(), s.type_.clone().into(), s.data.len().into(), age.into()],
        (_, Object::Lease(l)) => vec![meta.name.clone().into(), l.spec.holder_identity.clone().into(), age.into()],
    }
}

/// A Table of `objects`; `page` is the list they are a page of.
pub fn table(kind: Served, objects: &[Object], state: &AppState, include: Include, page: Option<&crate::paging::Page>) -> Value {
    let now = chrono::Utc::now();
    let definitions: Vec<Value> = columns(kind)
        .iter()
        .map(|(name, type_, priority)| {
            let format = if *name == "Name" { "name" } else { "" };
            json!({"name": name, "type": type_, "format": format, "description": "", "priority": priority})
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let mut row = json!({"cells": cells(kind, object, state, now)});
            match include {
                Include::None => {}
                Include::Object => row["object"] = to_json(kind, object),
                Include::Metadata => {
                    let full = to_json(kind, object);
                    row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": full["metadata"]});
                }
            }
            row
        })
        .collect();
    let metadata = page.map_or_else(|| json!({}), crate::k8s::objects::list_meta);
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "columnDefinitions": definitions, "rows": rows})
}

/// The node's readiness as the server judges it: its condition and its lease's renewal.
fn node_readiness(state: &AppState, node: &shared::model::Node, now: shared::model::Time) -> shared::readiness::Readiness {
    let lease = state.store.get(&crate::store::Key::new(shared::model::Kind::Lease, "", &node.metadata.name));
    let lease = lease.as_deref().and_then(|o| match o {
        Object::Lease(l) => Some(l),
        _ => None,
    });
    node.readiness(lease, now, state.config.node_monitor_grace)
}
