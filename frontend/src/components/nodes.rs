//! Nodes in detail, with what their pods request and use, and cordon and uncordon.

use std::rc::Rc;

use shared::api::paths;
use shared::metrics::NodeMetrics;
use shared::model::Node;
use shared::quantity::{format_cpu, format_memory};
use shared::words::{age, node_status};
use yew::prelude::*;

use crate::api::ApiError;
use crate::browser;
use crate::components::node_pen::usage_bars;
use crate::context::{use_cluster, use_node_metrics, use_session};
use crate::session::SessionAction;
use crate::store::Collection;
use crate::view::stages::layout;

#[component]
pub fn Nodes() -> Html {
    let session = use_session();
    let cluster = use_cluster();
    let error = use_state(|| None::<String>);
    let metrics = use_node_metrics(&session);
    let view = {
        let (nodes, pods) = (cluster.nodes.clone(), cluster.pods.clone());
        use_memo((nodes, pods, metrics), |(nodes, pods, metrics): &(Collection<Node>, _, Option<Rc<Vec<NodeMetrics>>>)| {
            layout(nodes, pods, None, metrics.as_deref().map(Vec::as_slice))
        })
    };
    let toggle = {
        let (session, error) = (session.clone(), error.clone());
        Callback::from(move |(name, cordon): (String, bool)| {
            let (session, error) = (session.clone(), error.clone());
            wasm_bindgen_futures::spawn_local(async move {
                let path = if cordon { paths::node_cordon(&name) } else { paths::node_uncordon(&name) };
                match session.client().post_empty::<serde_json::Value>(&path).await {
                    Ok(_) => error.set(None),
                    Err(ApiError::Unauthorized(message)) => session.dispatch(SessionAction::Unauthorized(message)),
                    Err(e) => error.set(Some(format!("cannot {} {name}: {e}", if cordon { "cordon" } else { "uncordon" }))),
                }
            });
        })
    };
    let now = browser::now();
    html! {
        <section class="page" data-testid="nodes-page">
            <header class="page-head"><h1>{ "Nodes" }</h1></header>
            if let Some(message) = &*error { <p class="error" data-testid="cordon-error">{ message }</p> }
            if view.pens.is_empty() {
                <p class="muted">{ if cluster.nodes.listed { "No node has registered yet." } else { "Listing nodes…" } }</p>
            }
            <table class="grid nodes">
                <thead><tr>
                    <th>{ "Name" }</th><th>{ "Condition" }</th><th>{ "Usage (used / requested / allocatable)" }</th><th>{ "Capacity" }</th>
                    <th>{ "Labels" }</th><th>{ "Taints" }</th><th>{ "Agent" }</th><th>{ "Status reported" }</th><th></th>
                </tr></thead>
                <tbody>
                    { for view.pens.iter().map(|pen| {
                        let node = &pen.node;
                        let status = &node.status;
                        let name = node.metadata.name.clone();
                        let cordoned = status.unschedulable;
                        let onclick = { let (toggle, name) = (toggle.clone(), name.clone()); Callback::from(move |_| toggle.emit((name.clone(), !cordoned))) };
                        let labels: Vec<String> = node.metadata.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        let taints: Vec<String> = status.taints.iter().map(|t| format!("{}={}:{}", t.key, t.value, t.effect)).collect();
                        let info = &status.node_info;
                        html! {
                            <tr key={name.clone()} data-testid="node-row" data-node={name.clone()} data-cordoned={cordoned.to_string()}>
                                <td><strong>{ &name }</strong></td>
                                <td data-testid="node-condition">{ node_status(node, node.reported_readiness()) }</td>
                                <td class="usage">{ usage_bars(&pen.usage) }</td>
                                <td>{ format!("cpu {}, memory {}, pods {}", format_cpu(status.capacity.cpu), format_memory(status.capacity.memory), status.capacity.pods) }</td>
                                <td>{ labels.join(", ") }</td>
                                <td>{ taints.join(", ") }</td>
                                <td>{ format!("{} {} {}", info.runtime, info.runtime_version, info.agent_version) }</td>
                                <td>{ status.last_heartbeat.map(|t| format!("{} ago", age(now, Some(t)))).unwrap_or_else(|| "never".to_string()) }</td>
                                <td>
                                    if cordoned {
                                        <button {onclick} data-testid="uncordon">{ "Uncordon" }</button>
                                    } else {
                                        <button {onclick} data-testid="cordon">{ "Cordon" }</button>
                                    }
                                </td>
                            </tr>
                        }
                    }) }
                </tbody>
            </table>
        </section>
    }
}
