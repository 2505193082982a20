//! Services and their endpoints: the running, ready pods their selector matches.

use std::rc::Rc;

use shared::model::{Kind, Service};
use yew::prelude::*;

use crate::components::table_head::table_head;
use crate::context::{use_cluster, use_session, use_watch};
use crate::route::Route;
use crate::view::stages::in_namespace;

#[component]
pub fn Services() -> Html {
    let session = use_session();
    let cluster = use_cluster();
    use_watch(Kind::Service, &session, &cluster, true);
    let namespace = session.namespace.clone();
    let services: Vec<Rc<Service>> =
        cluster.services.values().filter(|s| in_namespace(&s.metadata.namespace, namespace.as_deref())).cloned().collect();
    html! {
        <section class="page" data-testid="services-page">
            <header class="page-head"><h1>{ "Services" }</h1></header>
            if services.is_empty() {
                <p class="muted">{ if cluster.services.listed { "No services in this namespace. Apply the Service template to make one." } else { "Listing services…" } }</p>
            }
            <table class="grid">
                { table_head(&["Name", "Type", "Ports", "Selector", "Endpoints"]) }
                <tbody>
                    { for services.iter().map(|s| {
                        let ports: Vec<String> = s.spec.ports.iter().map(|p| {
                            let name = if p.name.is_empty() { String::new() } else { format!("{}: ", p.name) };
                            let protocol = if p.protocol.is_empty() { "TCP".to_string() } else { p.protocol.to_ascii_uppercase() };
                            format!("{name}{}→{}/{protocol}", p.port, p.target_port)
                        }).collect();
                        let selector: Vec<String> = s.spec.selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        let kind = if s.spec.type_.is_empty() { "ClusterIP" } else { s.spec.type_.as_str() };
                        html! {
                            <tr key={s.metadata.key()} data-testid="service-row" data-name={s.metadata.name.clone()}>
                                <td><strong>{ s.metadata.key() }</strong></td><td>{ kind }</td><td>{ ports.join(", ") }</td>
                                <td>{ selector.join(", ") }</td>
                                <td>
                                    if s.status.endpoints.is_empty() { <span class="muted">{ "none: no running, ready pod matches" }</span> }
                                    <ul class="endpoints">
                                        { for s.status.endpoints.iter().map(|e| html! {
                                            <li data-testid="endpoint">
                                                <code>{ &e.ip }</code>{ " · " }
                                                <a href={Route::Pod { namespace: s.metadata.namespace.clone(), name: e.pod.clone() }.href()}>{ &e.pod }</a>
                                                if !e.node_name.is_empty() { <span class="muted">{ format!(" on {}", e.node_name) }</span> }
                                            </li>
                                        }) }
                                    </ul>
                                </td>
                            </tr>
                        }
                    }) }
                </tbody>
            </table>
        </section>
    }
}
