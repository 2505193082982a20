//! Deployments with their replicas and pods; buttons that scale them through `…/scale`,
//! pause and resume them (`spec.paused`) and undo their last rollout (`shared::rollout`'s
//! rule, as `kubectl rollout undo`); each one's ReplicaSets side by side, and the chosen
//! one's rollout charted live from the samples the page takes as its status changes.

use std::rc::Rc;

use shared::api::paths;
use shared::api_error::Class;
use shared::model::{Deployment, Kind, ObjectMeta, ReplicaSet, Scale, ScaleSpec, conditions, find_condition};
use shared::rollout::{Undo, reasons, undo};
use yew::prelude::*;

use crate::api::{ApiError, Client, Method};
use crate::browser;
use crate::components::replica_sets::replica_sets;
use crate::components::rollout_chart::RolloutChart;
use crate::components::stage_board::StageBoard;
use crate::context::{use_cluster, use_session, use_watch};
use crate::session::SessionAction;
use crate::view::rollout::{RolloutHistory, replica_set_columns};
use crate::view::stages::in_namespace;

/// A read-change-write that met a newer version (409) starts again, this many times at most.
const WRITE_ATTEMPTS: u32 = 3;

/// The page keeps every deployment's samples: a new state exactly when one is added.
impl Reducible for RolloutHistory {
    type Action = (Vec<Rc<Deployment>>, i64);

    fn reduce(self: Rc<Self>, (deployments, now_ms): Self::Action) -> Rc<Self> {
        let mut next = (*self).clone();
        if next.observe(deployments.iter().map(|d| &**d), now_ms) { Rc::new(next) } else { self }
    }
}

/// What a rollout button asks of a deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Pause,
    Resume,
    Undo,
}

/// Why a change was not made.
enum Refusal {
    Api(ApiError),
    /// `rollout undo` refused, in kubectl's words, or had nothing to do.
    Undo(String),
}

/// Reads the deployment, changes it and writes it back with the version read, so that a
/// write made in between (the controller's status, another user) is never overwritten; on
/// 409, again from a fresh read. `sets` are the ReplicaSets of its namespace, for undo.
async fn change_deployment(client: &Client, namespace: &str, name: &str, change: Change, sets: &[ReplicaSet]) -> Result<(), Refusal> {
    let path = paths::object(Kind::Deployment, namespace, name);
    let mut attempt = 1;
    loop {
        let mut deployment: Deployment = client.get(&path).await.map_err(Refusal::Api)?;
        match change {
            Change::Pause => deployment.spec.paused = true,
            Change::Resume => deployment.spec.paused = false,
            Change::Undo => match undo(&deployment, sets, 0) {
                Ok(Undo::RollBack(rollback)) => rollback.apply_to(&mut deployment),
                Ok(skipped) => return Err(Refusal::Undo(skipped.summary())),
                Err(refused) => return Err(Refusal::Undo(refused.to_string())),
            },
        }
        match client.send::<_, Deployment>(Method::Put, &path, &deployment).await {
            Ok(_) => return Ok(()),
            Err(conflict) if conflict.class() == Some(Class::Conflict) && attempt < WRITE_ATTEMPTS => attempt += 1,
            Err(error) => return Err(Refusal::Api(error)),
        }
    }
}

/// The rollout's state in a few words: paused, or the Progressing condition's reason.
fn rollout_state(d: &Deployment) -> String {
    if d.spec.paused {
        return "paused".to_string();
    }
    find_condition(&d.status.conditions, reasons::PROGRESSING)
        .map(|c| if c.status == conditions::TRUE { c.reason.clone() } else { format!("{} ({})", c.reason, c.message) })
        .unwrap_or_default()
}

#[component]
pub fn Deployments() -> Html {
    let session = use_session();
    let cluster = use_cluster();
    use_watch(Kind::Deployment, &session, &cluster, true);
    use_watch(Kind::ReplicaSet, &session, &cluster, true);
    let error = use_state(|| None::<String>);
    let selected = use_state(|| None::<String>);
    let history = use_reducer(RolloutHistory::default);
    {
        let history = history.dispatcher();
        use_effect_with(cluster.deployments.clone(), move |deployments| {
            history.dispatch((deployments.values().cloned().collect(), browser::now().timestamp_millis()));
        });
    }
    let namespace = session.namespace.clone();
    let deployments: Vec<Rc<Deployment>> =
        cluster.deployments.values().filter(|d| in_namespace(&d.metadata.namespace, namespace.as_deref())).cloned().collect();
    let charted = (*selected).clone().filter(|key| deployments.iter().any(|d| d.metadata.key() == *key));
    let charted = charted.or_else(|| deployments.first().map(|d| d.metadata.key()));

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
    let change = {
        let (session, error, cluster) = (session.clone(), error.clone(), cluster.clone());
        Callback::from(move |(ns, name, change): (String, String, Change)| {
            let (session, error) = (session.clone(), error.clone());
            let sets: Vec<ReplicaSet> =
                cluster.replica_sets.values().filter(|rs| rs.metadata.namespace == ns).map(|rs| (**rs).clone()).collect();
            wasm_bindgen_futures::spawn_local(async move {
                match change_deployment(&session.client(), &ns, &name, change, &sets).await {
                    Ok(()) => error.set(None),
                    Err(Refusal::Api(ApiError::Unauthorized(message))) => session.dispatch(SessionAction::Unauthorized(message)),
                    Err(Refusal::Api(e)) => error.set(Some(format!("cannot {} {ns}/{name}: {e}", change_verb(change)))),
                    Err(Refusal::Undo(words)) => error.set(Some(format!("deployment {ns}/{name}: {words}"))),
                }
            });
        })
    };

    html! {
        <section class="page" data-testid="deployments-page">
            <header class="page-head"><h1>{ "Deployments" }</h1></header>
            if let Some(message) = &*error { <p class="error" data-testid="deployment-error">{ message }</p> }
            if deployments.is_empty() {
                <p class="muted">{ if cluster.deployments.listed { "No deployments in this namespace. Apply the Deployment template to make one." } else { "Listing deployments…" } }</p>
            }
            { for deployments.iter().map(|d| {
                let (ns, name, replicas, key) = (d.metadata.namespace.clone(), d.metadata.name.clone(), d.spec.replicas, d.metadata.key());
                let selector = &d.spec.selector;
                let pods: Vec<_> = cluster.pods.values()
                    .filter(|p| p.metadata.namespace == ns && !selector.is_empty() && selector.matches(&p.metadata.labels))
                    .cloned().collect();
                let sets: Vec<ReplicaSet> = cluster.replica_sets.values()
                    .filter(|rs| rs.metadata.namespace == ns && rs.metadata.controller().is_some_and(|r| r.uid == d.metadata.uid))
                    .map(|rs| (**rs).clone()).collect();
                let columns = replica_set_columns(d, &sets, &pods);
                let down = { let (scale, ns, name) = (scale.clone(), ns.clone(), name.clone());
                    Callback::from(move |_| scale.emit((ns.clone(), name.clone(), (replicas - 1).max(0)))) };
                let up = { let (scale, ns, name) = (scale.clone(), ns.clone(), name.clone());
                    Callback::from(move |_| scale.emit((ns.clone(), name.clone(), replicas + 1))) };
                let act = |what: Change| { let (change, ns, name) = (change.clone(), ns.clone(), name.clone());
                    Callback::from(move |_| change.emit((ns.clone(), name.clone(), what))) };
                let (pause_or_resume, label, testid) =
                    if d.spec.paused { (Change::Resume, "Resume", "rollout-resume") } else { (Change::Pause, "Pause", "rollout-pause") };
                let chart = { let (selected, key) = (selected.clone(), key.clone()); Callback::from(move |_| selected.set(Some(key.clone()))) };
                let is_charted = charted.as_deref() == Some(key.as_str());
                let images: Vec<String> = d.spec.template.spec.containers.iter().map(|c| c.image.clone()).collect();
                html! {
                    <article class="card" key={key.clone()} data-testid="deployment-row" data-name={name.clone()} data-paused={d.spec.paused.to_string()}>
                        <header>
                            <strong>{ &key }</strong>
                            <span class="scale">
                                <button onclick={down} disabled={replicas == 0} data-testid="scale-down" title="one replica fewer">{ "−" }</button>
                                <span class="replicas" data-testid="replicas">{ replicas }</span>
                                <button onclick={up} data-testid="scale-up" title="one replica more">{ "+" }</button>
                            </span>
                            <span class="rollout-buttons">
                                <button onclick={act(pause_or_resume)} data-testid={testid}
                                    title="spec.paused: a paused deployment scales but rolls nothing out">{ label }</button>
                                <button onclick={act(Change::Undo)} data-testid="rollout-undo"
                                    title="back to the previous revision's template, as kubectl rollout undo">{ "Undo" }</button>
                                if !is_charted { <button class="link" onclick={chart} data-testid="rollout-show">{ "chart" }</button> }
                            </span>
                        </header>
                        <p class="muted">
                            { format!("ready {}/{replicas} · up-to-date {} · available {} · {} · selector {} · image {}",
                                d.status.ready_replicas, d.status.updated_replicas, d.status.available_replicas,
                                rollout_state(d), selector, images.join(", ")) }
                        </p>
                        { replica_sets(&columns) }
                        if is_charted {
                            if let Some(samples) = history.samples(&d.metadata.uid) { <RolloutChart samples={samples.clone()} /> }
                        }
                        <StageBoard {pods} />
                    </article>
                }
            }) }
        </section>
    }
}

fn change_verb(change: Change) -> &'static str {
    match change {
        Change::Pause => "pause",
        Change::Resume => "resume",
        Change::Undo => "undo the rollout of",
    }
}
