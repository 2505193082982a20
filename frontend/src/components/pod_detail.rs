//! One pod, explained: its stage and, while Pending, why in plain words; the timeline
//! Created → Scheduled → Pulled → Started → Running with T+ms deltas; the scheduler's
//! decision table; conditions, containers, events, logs and a command box.

use std::rc::Rc;

use shared::api::paths;
use shared::api_error::Class;
use shared::model::{ContainerState, Kind, Pod, conditions, find_condition};
use shared::scheduler::Explanation;
use shared::words::{age, first_seen};
use web_sys::HtmlSelectElement;
use yew::prelude::*;

use crate::api::{self, ApiError, Cancel};
use crate::browser;
use crate::components::command_box::CommandBox;
use crate::components::decision_table::DecisionTable;
use crate::components::sheep::stage_badge;
use crate::components::table_head::table_head;
use crate::context::{use_cluster, use_session, use_watch};
use crate::route::Route;
use crate::session::SessionAction;
use crate::view::pod_detail::{
    NodeAt, Step, TIMELINE_SCALE, TimelineBar, pending_reason, pod_events, sorted_conditions, timeline, timeline_bars,
};
use crate::view::stages::stage_id;
use crate::view::time::{clock, delta, t_plus};

/// Log lines fetched when the page opens or on refresh.
const LOG_TAIL: u32 = 200;
/// A followed log keeps at most this many bytes.
const LOG_LIMIT: usize = 256 * 1024;

#[derive(Properties, PartialEq)]
pub struct PodDetailProps {
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Decision {
    Loading,
    Found(Rc<Explanation>),
    Missing(String),
}

#[component]
pub fn PodDetail(props: &PodDetailProps) -> Html {
    let session = use_session();
    let cluster = use_cluster();
    use_watch(Kind::Event, &session, &cluster, true);
    let key = format!("{}/{}", props.namespace, props.name);
    let pod = cluster.pods.get(&key).cloned();

    let decision = use_state(|| Decision::Loading);
    let refresh = use_state(|| 0u32);
    {
        let decision = decision.clone();
        let session = session.clone();
        let (ns, name) = (props.namespace.clone(), props.name.clone());
        // Ask again whenever the pod's scheduling state changes.
        let scheduling = pod.as_ref().map(|p| {
            let condition = find_condition(&p.status.conditions, conditions::POD_SCHEDULED);
            (p.metadata.uid.clone(), p.spec.node_name.clone(), condition.map(|c| (c.status.clone(), c.message.clone())))
        });
        use_effect_with((ns, name, scheduling, *refresh, session.token.clone()), move |(ns, name, _, _, _)| {
            let path = paths::pod_scheduling(ns, name);
            let client = session.client();
            wasm_bindgen_futures::spawn_local(async move {
                let next = match client.get::<Explanation>(&path).await {
                    Ok(explanation) => Decision::Found(Rc::new(explanation)),
                    Err(ApiError::Unauthorized(message)) => {
                        session.dispatch(SessionAction::Unauthorized(message));
                        return;
                    }
                    Err(error) if error.class() == Some(Class::NotFound) => Decision::Missing(
                        "The scheduler has no decision on record for this pod yet (it has not tried, or the server restarted since)."
                            .to_string(),
                    ),
                    Err(error) => Decision::Missing(error.to_string()),
                };
                decision.set(next);
            });
        });
    }

    let Some(pod) = pod else {
        let text =
            if cluster.pods.listed { format!("No pod {key}: it was deleted, or never existed.") } else { "Listing pods…".to_string() };
        return html! {
            <section class="page" data-testid="pod-detail" data-state="missing">
                <h1>{ &key }</h1>
                <p>{ text }</p>
                <a href={Route::Cluster.href()}>{ "Back to the cluster" }</a>
            </section>
        };
    };

    let events = pod_events(&pod, cluster.events.values());
    let rows = timeline(&pod, &events);
    let node = cluster.nodes.get(&pod.spec.node_name).cloned();
    // The page is reused when another pod opens: an answer about the previous one is stale.
    let decision = match &*decision {
        Decision::Found(e) if e.pod != key => Decision::Loading,
        other => other.clone(),
    };
    let explanation = match &decision {
        Decision::Found(e) => Some(e.clone()),
        _ => None,
    };
    let now = browser::now();
    let node_at = node.as_deref().map(|node| NodeAt { node, grace: session.node_monitor_grace() });
    let reason = pending_reason(&pod, explanation.as_deref(), node_at);
    let stage = pod.stage();
    let on_refresh = {
        let refresh = refresh.clone();
        Callback::from(move |_| refresh.set(*refresh + 1))
    };
    let on_delete = {
        let session = session.clone();
        let path = paths::object(Kind::Pod, &props.namespace, &props.name);
        Callback::from(move |_| {
            let session = session.clone();
            let path = path.clone();
            wasm_bindgen_futures::spawn_local(async move {
                match session.client().delete::<serde_json::Value>(&path).await {
                    Ok(_) => browser::set_location_hash(&Route::Cluster.href()),
                    Err(ApiError::Unauthorized(message)) => session.dispatch(SessionAction::Unauthorized(message)),
                    Err(error) => web_sys::console::error_1(&error.to_string().into()),
                }
            });
        })
    };

    html! {
        <section class="page pod-detail" data-testid="pod-detail" data-stage={stage_id(stage)}>
            <header class="page-head">
                <h1>{ &key }</h1>
                { stage_badge(stage) }
                <span class="muted">{ format!(" status {} · phase {}", pod.display_status(), pod.status.phase) }</span>
                <button class="danger" onclick={on_delete} data-testid="pod-delete">{ "Delete" }</button>
            </header>
            <dl class="facts">
                <dt>{ "Node" }</dt><dd data-testid="pod-node">{ if pod.spec.node_name.is_empty() { "— (none yet)".to_string() } else { pod.spec.node_name.clone() } }</dd>
                <dt>{ "Pod IP" }</dt><dd>{ if pod.status.pod_ip.is_empty() { "—" } else { &pod.status.pod_ip } }</dd>
                <dt>{ "Created" }</dt><dd>{ pod.metadata.created_at.map(|t| format!("{} ({} ago)", clock(t), age(now, Some(t)))).unwrap_or_default() }</dd>
                <dt>{ "Labels" }</dt><dd>{ pod.metadata.labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ") }</dd>
                <dt>{ "Requests" }</dt><dd>{ format!("cpu {}, memory {}", shared::quantity::format_cpu(pod.spec.requests().cpu), shared::quantity::format_memory(pod.spec.requests().memory)) }</dd>
                <dt>{ "UID" }</dt><dd><code>{ &pod.metadata.uid }</code></dd>
            </dl>
            if let Some(reason) = reason {
                <p class={classes!("reason", format!("stage-{}", stage_id(stage)))} data-testid="pending-reason">{ reason }</p>
            }

            <h2>{ "Timeline" }</h2>
            { timeline_chart(&timeline_bars(&rows)) }
            <table class="grid timeline" data-testid="timeline">
                { table_head(&["Step", "At (UTC)", "Since created", "Since previous", "Who", "Detail"]) }
                <tbody>
                    { for rows.iter().map(|row| html! {
                        <tr class={classes!(row.at.is_none().then_some("pending"))} data-testid="timeline-row" data-step={row.step.name()}
                            data-reached={row.at.is_some().to_string()}>
                            <td><strong>{ row.step.name() }</strong></td>
                            <td>{ row.at.map(clock).unwrap_or_else(|| "…".to_string()) }</td>
                            <td class="num">{ row.t_plus_ms.map(t_plus).unwrap_or_default() }</td>
                            <td class="num">{ row.delta_ms.map(delta).unwrap_or_default() }</td>
                            <td class="muted">{ row.step.actor() }</td>
                            <td>{ &row.detail }</td>
                        </tr>
                    }) }
                </tbody>
            </table>

            <h2>
                { "Scheduler's decision" }
                <button class="link" onclick={on_refresh} data-testid="decision-refresh">{ "refresh" }</button>
            </h2>
            { match &decision {
                Decision::Loading => html! { <p class="muted">{ "Asking the scheduler…" }</p> },
                Decision::Found(explanation) => html! { <DecisionTable explanation={explanation.clone()} /> },
                Decision::Missing(text) => html! { <p class="muted" data-testid="decision-missing">{ text }</p> },
            } }

            <div class="columns">
                <div>
                    <h2>{ "Conditions" }</h2>
                    <table class="grid" data-testid="conditions">
                        { table_head(&["Type", "Status", "Reason", "Message", "Since"]) }
                        <tbody>
                            { for sorted_conditions(&pod.status.conditions).iter().map(|c| html! {
                                <tr data-testid="condition" data-type={c.type_.clone()} data-status={c.status.clone()}>
                                    <td>{ &c.type_ }</td><td>{ &c.status }</td><td>{ &c.reason }</td><td>{ &c.message }</td>
                                    <td>{ c.last_transition_time.map(clock).unwrap_or_default() }</td>
                                </tr>
                            }) }
                        </tbody>
                    </table>
                </div>
                <div>
                    <h2>{ "Containers" }</h2>
                    { containers(&pod) }
                </div>
            </div>

            <h2>{ "Events" }</h2>
            <table class="grid" data-testid="pod-events">
                { table_head(&["At", "Type", "Reason", "Source", "Count", "Message"]) }
                <tbody>
                    { for events.iter().map(|e| html! {
                        <tr class={classes!((e.type_ == "Warning").then_some("warning"))} data-testid="pod-event" data-reason={e.reason.clone()}>
                            <td>{ first_seen(e).map(clock).unwrap_or_default() }</td><td>{ &e.type_ }</td><td>{ &e.reason }</td>
                            <td>{ &e.source }</td><td class="num">{ e.count }</td><td>{ &e.message }</td>
                        </tr>
                    }) }
                </tbody>
            </table>

            <Logs pod={pod.clone()} />
            if pod.is_bound() {
                <CommandBox pod={pod.clone()} />
            }
        </section>
    }
}

/// The timeline drawn: a bar a step, as long as the wait before it, each on its row.
fn timeline_chart(bars: &[TimelineBar]) -> Html {
    const ROW: i64 = 22;
    const LABEL: i64 = 80;
    const PLOT: i64 = 420;
    let height = ROW * Step::ALL.len() as i64;
    let row_of = |step: Step| Step::ALL.iter().position(|&s| s == step).unwrap_or_default() as i64;
    html! {
        <svg class="timeline-chart" data-testid="timeline-chart" viewBox={format!("0 0 {} {height}", LABEL + PLOT + 90)}
            role="img" aria-label="The pod's steps on one time scale">
            { for Step::ALL.iter().map(|&step| html! {
                <text x="0" y={(row_of(step) * ROW + 15).to_string()} class="timeline-step">{ step.name() }</text>
            }) }
            { for bars.iter().map(|bar| {
                let (x, y) = (LABEL + bar.from * PLOT / TIMELINE_SCALE, row_of(bar.step) * ROW + 4);
                // A step with no wait still gets a visible mark.
                let width = ((bar.to - bar.from) * PLOT / TIMELINE_SCALE).max(2);
                html! {
                    <g data-testid="timeline-bar" data-step={bar.step.name()} data-t-plus-ms={bar.t_plus_ms.to_string()}>
                        <rect class={format!("bar-{}", bar.step.name())} x={x.to_string()} y={y.to_string()}
                            width={width.to_string()} height={(ROW - 8).to_string()} rx="3" />
                        <text x={(x + width + 6).to_string()} y={(y + 11).to_string()} class="timeline-t">{ t_plus(bar.t_plus_ms) }</text>
                    </g>
                }
            }) }
        </svg>
    }
}

fn containers(pod: &Pod) -> Html {
    html! {
        <table class="grid" data-testid="containers">
            { table_head(&["Name", "Image", "State", "Ready", "Restarts", "Detail"]) }
            <tbody>
                { for pod.spec.containers.iter().map(|c| {
                    let status = pod.status.container_statuses.iter().find(|s| s.name == c.name);
                    let (state, detail) = match status.map(|s| &s.state) {
                        Some(ContainerState::Waiting { reason, message }) => (reason.clone(), message.clone()),
                        Some(ContainerState::Running { started_at }) => {
                            ("Running".to_string(), started_at.map(|t| format!("started {}", clock(t))).unwrap_or_default())
                        }
                        Some(ContainerState::Terminated { exit_code, reason, message, .. }) => {
                            (format!("Terminated ({reason})"), format!("exit code {exit_code} {message}"))
                        }
                        None => ("—".to_string(), "no status reported yet".to_string()),
                    };
                    html! {
                        <tr data-testid="container" data-name={c.name.clone()} data-state={state.clone()}>
                            <td>{ &c.name }</td><td><code>{ &c.image }</code></td><td>{ state }</td>
                            <td>{ status.map(|s| if s.ready { "yes" } else { "no" }).unwrap_or("—") }</td>
                            <td class="num">{ status.map(|s| s.restart_count).unwrap_or(0) }</td><td>{ detail }</td>
                        </tr>
                    }
                }) }
            </tbody>
        </table>
    }
}

#[derive(Properties)]
struct LogsProps {
    pod: Rc<Pod>,
}

impl PartialEq for LogsProps {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.pod, &other.pod)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum LogText {
    Idle,
    Text(String),
    Error(String),
}

/// The container's log: the last lines on request, or followed live.
#[component]
fn Logs(props: &LogsProps) -> Html {
    let session = use_session();
    let pod = &props.pod;
    let container = use_state(|| pod.spec.containers.first().map(|c| c.name.clone()).unwrap_or_default());
    let follow = use_state(|| false);
    let text = use_state(|| LogText::Idle);
    let fetches = use_state(|| 0u32);
    let started = pod.is_bound();
    let (ns, name) = (pod.metadata.namespace.clone(), pod.metadata.name.clone());
    {
        let text = text.clone();
        let session = session.clone();
        use_effect_with(
            (ns, name, (*container).clone(), *follow, *fetches, started, session.token.clone()),
            move |(ns, name, container, follow, _, started, _)| {
                let cancel = Cancel::default();
                if *started {
                    let base = format!("{}?container={container}&tail={LOG_TAIL}", paths::pod_log(ns, name));
                    let client = session.client();
                    let follow = *follow;
                    let cancel = cancel.clone();
                    wasm_bindgen_futures::spawn_local(async move {
                        let result = if follow {
                            let buffer = Rc::new(std::cell::RefCell::new(String::new()));
                            let sink = {
                                let (buffer, text) = (buffer.clone(), text.clone());
                                Callback::from(move |chunk: String| {
                                    let mut all = buffer.borrow_mut();
                                    all.push_str(&chunk);
                                    if all.len() > LOG_LIMIT {
                                        let cut = all.len() - LOG_LIMIT;
                                        let cut = (cut..all.len()).find(|&i| all.is_char_boundary(i)).unwrap_or(all.len());
                                        all.drain(..cut);
                                    }
                                    text.set(LogText::Text(all.clone()));
                                })
                            };
                            api::follow_text(&client, &format!("{base}&follow=true"), &cancel, sink).await
                        } else {
                            client.get_text(&base).await.map(|body| text.set(LogText::Text(body)))
                        };
                        match result {
                            Ok(()) => {}
                            Err(ApiError::Unauthorized(message)) => session.dispatch(SessionAction::Unauthorized(message)),
                            Err(error) if !cancel.is_cancelled() => text.set(LogText::Error(error.to_string())),
                            Err(_) => {}
                        }
                    });
                }
                move || cancel.cancel()
            },
        );
    }
    let on_container = {
        let container = container.clone();
        Callback::from(move |e: web_sys::Event| container.set(e.target_unchecked_into::<HtmlSelectElement>().value()))
    };
    let on_follow = {
        let follow = follow.clone();
        Callback::from(move |_| follow.set(!*follow))
    };
    let on_reload = {
        let fetches = fetches.clone();
        Callback::from(move |_| fetches.set(*fetches + 1))
    };
    html! {
        <section class="logs">
            <h2>
                { "Logs " }
                <select onchange={on_container}>
                    { for pod.spec.containers.iter().map(|c| html! { <option value={c.name.clone()} selected={c.name == *container}>{ &c.name }</option> }) }
                </select>
                <button class="link" onclick={on_reload} disabled={*follow} data-testid="logs-reload">{ "reload" }</button>
                <label class="follow"><input type="checkbox" checked={*follow} onchange={on_follow} data-testid="logs-follow" />{ " follow" }</label>
            </h2>
            <pre class="log" data-testid="pod-logs">
                { match &*text {
                    LogText::Idle if !started => "No logs: the pod has no node yet.".to_string(),
                    LogText::Idle => "Loading…".to_string(),
                    LogText::Text(body) if body.is_empty() => "(empty)".to_string(),
                    LogText::Text(body) => body.clone(),
                    LogText::Error(message) => format!("Cannot read the log: {message}"),
                } }
            </pre>
        </section>
    }
}
