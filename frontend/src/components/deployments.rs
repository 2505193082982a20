//! Deployments with their replicas and pods, and buttons that scale them through `…/scale`.

use std::rc::Rc;

use shared::api::paths;
use shared::model::{Deployment, Kind, ObjectMeta, Scale, ScaleSpec};
use yew::prelude::*;

use crate::api::{ApiError, Method};
use crate::components::stage_board::StageBoard;
use crate::context::{use_cluster, use_session, use_watch};
use crate::session::SessionAction;
use crate::view::stages::in_namespace;

#[component]
pub fn Deployments() -> Html {
    let session = use_session();
    let cluster = use_cluster();
    use_watch(Kind::Deployment, &session, &cluster, true);
    let error = use_state(|| None::<String>);
    let namespace = session.namespace.clone();
    let deployments: Vec<Rc<Deployment>> =
        cluster.deployments.values().filter(|d| in_namespace(&d.metadata.namespace, namespace.as_deref())).cloned().collect();

    let scale = {
        let (session, error) = (session.clone(), error.clone());
        Callback::from(move |(ns, name, replicas): (String, String, i32)| {
            let (session, error) = (session.clone(), error.clone());
            wasm_bindgen_futures::spawn_local(async move {
                let body = Scale {
                    kind: "Scale".into(),
                    metadata: ObjectMeta::named(&ns, &name),
                    spec: ScaleSpec { replicas },
                    ..Default::default()
                };
                match session.client().send::<_, Scale>(Method::Put, &paths::scale(&ns, &name), &body).await {
                    Ok(_) => error.set(None),
                    Err(ApiError::Unauthorized(message)) => session.dispatch(SessionAction::Unauthorized(message)),
                    Err(e) => error.set(Some(format!("cannot scale {ns}/{name} to {replicas}: {e}"))),
                }
            });
        })
    };

    html! {
        <section class="page" data-testid="deployments-page">
            <header class="page-head"><h1>{ "Deployments" }</h1></header>
            if let Some(message) = &*error { <p class="error" data-testid="scale-error">{ message }</p> }
            if deployments.is_empty() {
                <p class="muted">{ if cluster.deployments.listed { "No deployments in this namespace. Apply the Deployment template to make one." } else { "Listing deployments…" } }</p>
            }
            { for deployments.iter().map(|d| {
                let (ns, name, replicas) = (d.metadata.namespace.clone(), d.metadata.name.clone(), d.spec.replicas);
                let selector = &d.spec.selector;
                let pods: Vec<_> = cluster.pods.values()
                    .filter(|p| p.metadata.namespace == ns && !selector.is_empty() && selector.matches(&p.metadata.labels))
                    .cloned().collect();
                let down = { let (scale, ns, name) = (scale.clone(), ns.clone(), name.clone());
                    Callback::from(move |_| scale.emit((ns.clone(), name.clone(), (replicas - 1).max(0)))) };
                let up = { let (scale, ns, name) = (scale.clone(), ns.clone(), name.clone());
                    Callback::from(move |_| scale.emit((ns.clone(), name.clone(), replicas + 1))) };
                let images: Vec<String> = d.spec.template.spec.containers.iter().map(|c| c.image.clone()).collect();
                html! {
                    <article class="card" key={d.metadata.key()} data-testid="deployment-row" data-name={name.clone()}>
                        <header>
                            <strong>{ d.metadata.key() }</strong>
                            <span class="scale">
                                <button onclick={down} disabled={replicas == 0} data-testid="scale-down" title="one replica fewer">{ "−" }</button>
                                <span class="replicas" data-testid="replicas">{ replicas }</span>
                                <button onclick={up} data-testid="scale-up" title="one replica more">{ "+" }</button>
                            </span>
                        </header>
                        <p class="muted">
                            { format!("ready {}/{replicas} · available {} · selector {} · image {}",
                                d.status.ready_replicas, d.status.available_replicas, selector, images.join(", ")) }
                        </p>
                        <StageBoard {pods} />
                    </article>
                }
            }) }
        </section>
    }
}
