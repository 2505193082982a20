//! Apply: type or paste a JSON or YAML manifest (the reference examples are templates), see
//! its problems by line or by field before sending (YAML is read by the server once typing
//! pauses), then watch what the server answered (201, Pending) and the pod walk through its
//! stages live.

use std::rc::Rc;

use gloo_timers::future::TimeoutFuture;
use shared::api::paths;

use shared::model::{Object, PodStage};
use web_sys::HtmlTextAreaElement;
use yew::prelude::*;

use crate::api::{ApiError, Client, Method};
use crate::components::sheep::stage_badge;
use crate::components::stage_board::StageBoard;
use crate::context::{use_cluster, use_session};
use crate::plan::{Checked, Item, check, check_objects};
use crate::route::Route;
use crate::view::stages::stage_id;

const TEMPLATES: [(&str, &str, &str); 3] = [
    ("Pod", include_str!("../../templates/pod.json"), "apply-template-pod"),
    ("Deployment", include_str!("../../templates/deployment.json"), "apply-template-deployment"),
    ("Service", include_str!("../../templates/service.json"), "apply-template-service"),
];

/// What the server did with one object.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// 201: created; the answer is the stored object.
    Created(Rc<serde_json::Value>),
    /// It existed: replaced with PUT (200).
    Configured(Rc<serde_json::Value>),
    Failed(ApiError),
}

#[derive(Debug, Clone, PartialEq)]
struct Applied {
    label: String,
    object: Rc<Object>,
    outcome: Outcome,
}

/// Creates the object, or replaces it when it already exists, as `sheepctl apply` does.
async fn apply_one(client: &Client, item: &Item) -> Outcome {
    match client.send::<_, serde_json::Value>(Method::Post, &item.collection, &item.object).await {
        Ok(answer) => Outcome::Created(Rc::new(answer.body)),
        Err(error) if error.code() == Some(409) => match client.send::<_, serde_json::Value>(Method::Put, &item.path, &item.object).await {
            Ok(answer) => Outcome::Configured(Rc::new(answer.body)),
            Err(error) => Outcome::Failed(error),
        },
        Err(error) => Outcome::Failed(error),
    }
}

/// How long typing must pause before YAML goes to the server to be read.
const READ_AFTER_MS: u32 = 300;

/// The objects the server read from a YAML manifest, or what it found wrong (with line and
/// column) in the same words as a JSON problem found here.
async fn read_yaml(client: &Client, text: String) -> Result<Vec<Object>, String> {
    let answer = client.post_text::<serde_json::Value>(paths::MANIFESTS_PARSE, "application/yaml", text).await;
    let mut answer = answer.map_err(|error| error.to_string())?;
    let items = match answer.get_mut("items").map(serde_json::Value::take) {
        Some(serde_json::Value::Array(items)) => items,
        _ => return Err(format!("unexpected answer from {}: no items", paths::MANIFESTS_PARSE)),
    };
    items.into_iter().map(|item| Object::from_value(item).map_err(|e| e.to_string())).collect()
}

#[component]
pub fn Apply() -> Html {
    let session = use_session();
    let text = use_state(|| TEMPLATES[0].1.to_string());
    let applied = use_state(Vec::<Applied>::new);
    let busy = use_state(|| false);
    let namespace = session.target_namespace().to_string();
    let here = {
        let text = (*text).clone();
        use_memo((text, namespace.clone()), |(text, ns)| check(text, ns))
    };
    // The server's reading of a YAML text, with the text and namespace it is for; a ticket
    // per edit drops the answers to texts since changed.
    let remote = use_state(|| None::<(String, String, Checked)>);
    let ticket = use_mut_ref(|| 0u64);
    {
        let (remote, ticket, session, yaml) = (remote.clone(), ticket.clone(), session.clone(), here.is_none());
        use_effect_with(((*text).clone(), namespace.clone()), move |(text, namespace)| {
            *ticket.borrow_mut() += 1;
            let mine = *ticket.borrow();
            if yaml {
                let (text, namespace) = (text.clone(), namespace.clone());
                wasm_bindgen_futures::spawn_local(async move {
                    TimeoutFuture::new(READ_AFTER_MS).await;
                    if *ticket.borrow() != mine {
                        return;
                    }
                    let read = read_yaml(&session.client(), text.clone()).await;
                    if *ticket.borrow() == mine {
                        let checked = match read {
                            Ok(objects) => check_objects(objects, &namespace),
                            Err(error) => Checked::Syntax(error),
                        };
                        remote.set(Some((text, namespace, checked)));
                    }
                });
            }
        });
    }
    let checked = match (&*here, &*remote) {
        (Some(checked), _) => checked.clone(),
        (None, Some((read, ns, checked))) if *read == *text && *ns == namespace => checked.clone(),
        (None, _) => Checked::Reading,
    };

    let oninput = {
        let text = text.clone();
        Callback::from(move |e: InputEvent| text.set(e.target_unchecked_into::<HtmlTextAreaElement>().value()))
    };
    let onsubmit = {
        let (checked, applied, busy, session) = (checked.clone(), applied.clone(), busy.clone(), session.clone());
        Callback::from(move |e: SubmitEvent| {
            e.prevent_default();
            let Checked::Items(items) = checked.clone() else { return };
            if !checked.is_ready() || *busy {
                return;
            }
            let (applied, busy, session) = (applied.clone(), busy.clone(), session.clone());
            busy.set(true);
            applied.set(Vec::new());
            wasm_bindgen_futures::spawn_local(async move {
                let client = session.client();
                let mut done = Vec::new();
                for item in items {
                    let outcome = apply_one(&client, &item).await;
                    if let Outcome::Failed(ApiError::Unauthorized(message)) = &outcome {
                        session.dispatch(crate::session::SessionAction::Unauthorized(message.clone()));
                    }
                    done.push(Applied { label: item.label.clone(), object: Rc::new(item.object), outcome });
                    applied.set(done.clone());
                }
                busy.set(false);
            });
        })
    };

    html! {
        <section class="page apply" data-testid="apply-page">
            <div class="apply-editor">
                <h1>{ "Apply a manifest" }</h1>
                <p class="muted">{ format!("JSON or YAML; several documents separated by --- work too. Objects without a namespace go to \"{namespace}\".") }</p>
                <div class="templates">
                    <span class="muted">{ "Templates: " }</span>
                    { for TEMPLATES.iter().map(|(name, body, id)| {
                        let text = text.clone();
                        let onclick = Callback::from(move |_| text.set(body.to_string()));
                        html! { <button type="button" {onclick} data-testid={*id}>{ *name }</button> }
                    }) }
                </div>
                <form {onsubmit}>
                    <textarea value={(*text).clone()} {oninput} spellcheck="false" rows="24" data-testid="apply-editor" />
                    { check_view(&checked) }
                    <button type="submit" class="primary" disabled={!checked.is_ready() || *busy} data-testid="apply-submit">
                        { if *busy { "Applying…" } else { "Apply" } }
                    </button>
                </form>
            </div>
            <div class="apply-results">
                { for applied.iter().map(applied_view) }
                if applied.is_empty() {
                    <p class="muted">{ "The server's answer shows here the moment it arrives: 201 Created, phase Pending, node_name empty. Then the pod moves on as the scheduler and the agent act." }</p>
                }
            </div>
        </section>
    }
}

/// The live check under the editor.
fn check_view(checked: &Checked) -> Html {
    match checked {
        Checked::Empty => html! { <p class="muted" data-testid="apply-check">{ "Type or pick a template." }</p> },
        Checked::Reading => {
            html! { <p class="muted" data-testid="apply-check" data-state="reading">{ "The server is reading the YAML…" }</p> }
        }
        Checked::Syntax(error) => html! {
            <p class="error" data-testid="apply-check" data-state="syntax">{ format!("Cannot read the manifest: {error}") }</p>
        },
        Checked::Items(items) => html! {
            <div data-testid="apply-check" data-state={if checked.is_ready() { "ready" } else { "invalid" }}>
                { for items.iter().map(|item| {
                    if item.errors.is_empty() {
                        html! { <p class="ok">{ format!("✓ {} is valid", item.label) }</p> }
                    } else {
                        html! {
                            <div class="error">
                                <p>{ format!("{} is invalid:", item.label) }</p>
                                { field_errors(&item.errors) }
                            </div>
                        }
                    }
                }) }
            </div>
        },
    }
}

fn field_errors(errors: &[shared::api::FieldError]) -> Html {
    html! {
        <table class="field-errors">
            { for errors.iter().map(|e| html! {
                <tr data-testid="field-error" data-field={e.field.clone()}><td><code>{ &e.field }</code></td><td>{ &e.message }</td></tr>
            }) }
        </table>
    }
}

fn applied_view(applied: &Applied) -> Html {
    let (class, headline, body) = match &applied.outcome {
        Outcome::Created(body) => ("created", format!("201 Created: {}", applied.label), Some(body)),
        Outcome::Configured(body) => {
            ("configured", format!("200 OK: {} configured (it existed and was replaced)", applied.label), Some(body))
        }
        Outcome::Failed(error) => ("failed", format!("{}: {}", applied.label, error), None),
    };
    let details = match &applied.outcome {
        Outcome::Failed(error) if !error.details().is_empty() => field_errors(error.details()),
        _ => Html::default(),
    };
    let summary = body.map(|b| {
        let phase = b.pointer("/status/phase").and_then(|v| v.as_str()).unwrap_or("");
        let node = b.pointer("/spec/node_name").and_then(|v| v.as_str());
        let uid = b.pointer("/metadata/uid").and_then(|v| v.as_str()).unwrap_or("");
        match node {
            Some(node) => format!("phase {phase}, node_name {node:?}, uid {uid}"),
            None => format!("uid {uid}"),
        }
    });
    html! {
        <article class={classes!("applied", class)} data-testid="apply-result" data-outcome={class}>
            <h2>{ headline }</h2>
            if let Some(summary) = summary { <p data-testid="apply-answer">{ summary }</p> }
            { details }
            if let Some(body) = body {
                <details><summary>{ "The server's answer" }</summary><pre>{ serde_json::to_string_pretty(&**body).unwrap_or_default() }</pre></details>
            }
            if !matches!(applied.outcome, Outcome::Failed(_)) {
                <Tracker object={applied.object.clone()} />
            }
        </article>
    }
}

#[derive(Properties)]
struct TrackerProps {
    object: Rc<Object>,
}

/// By pointer: each apply makes a new `Rc`, and a deep comparison of every kind would only
/// add code to the bundle.
impl PartialEq for TrackerProps {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.object, &other.object)
    }
}

/// The applied object as the cache sees it now: a pod's path through the stages, or the
/// pods a deployment made.
#[component]
fn Tracker(props: &TrackerProps) -> Html {
    let cluster = use_cluster();
    let meta = props.object.metadata();
    match &*props.object {
        Object::Pod(_) => {
            let Some(pod) = cluster.pods.get(&meta.key()).cloned() else {
                return html! { <p class="muted" data-testid="apply-tracker" data-stage="">{ "Waiting for the watch stream to report the pod…" }</p> };
            };
            let stage = pod.stage();
            let steps = [
                (PodStage::WaitingForScheduler, "Pending, no node"),
                (PodStage::WaitingForAgent, "Pending, node chosen"),
                (PodStage::Running, "Running"),
            ];
            let reached = |s: PodStage| {
                matches!(
                    (s, stage),
                    (PodStage::WaitingForScheduler, _)
                        | (
                            PodStage::WaitingForAgent,
                            PodStage::WaitingForAgent | PodStage::Running | PodStage::Succeeded | PodStage::Failed
                        )
                        | (PodStage::Running, PodStage::Running | PodStage::Succeeded)
                )
            };
            let route = Route::Pod { namespace: meta.namespace.clone(), name: meta.name.clone() };
            html! {
                <div class="tracker" data-testid="apply-tracker" data-stage={stage_id(stage)}>
                    <ol class="steps">
                        { for steps.iter().map(|(s, label)| html! {
                            <li class={classes!(reached(*s).then_some("reached"), (*s == stage || (*s, stage) == (PodStage::WaitingForScheduler, PodStage::Unschedulable)).then_some("current"))}>{ *label }</li>
                        }) }
                    </ol>
                    <p>
                        { "Now: " }{ stage_badge(stage) }
                        if !pod.spec.node_name.is_empty() { { format!(" on {}", pod.spec.node_name) } }
                        { " · " }<a href={route.href()} data-testid="apply-open-detail">{ "open the pod's detail and the scheduler's decision" }</a>
                    </p>
                </div>
            }
        }
        Object::Deployment(deployment) => {
            let selector = &deployment.spec.selector;
            let pods: Vec<_> = cluster
                .pods
                .values()
                .filter(|p| p.metadata.namespace == meta.namespace && !selector.is_empty() && selector.matches(&p.metadata.labels))
                .cloned()
                .collect();
            html! {
                <div class="tracker" data-testid="apply-tracker">
                    <p>{ format!("{} of {} replica pod(s) so far:", pods.len(), deployment.spec.replicas) }</p>
                    <StageBoard {pods} />
                </div>
            }
        }
        _ => Html::default(),
    }
}
