//! The simulator page: build a cluster, add and delete pods, step or play, and watch the
//! server's own scheduler and scheduling queue decide, back off and requeue in the browser,
//! spread and bin-pack side by side; with 5,000 nodes a heat map shows which nodes a
//! decision evaluated (percentageOfNodesToScore).

use gloo_timers::callback::Interval;
use shared::model::{DEFAULT_NAMESPACE, PodStage};
use shared::scheduler::{QueueState, QueueStatus};
use web_sys::{HtmlInputElement, HtmlSelectElement};
use yew::prelude::*;

use crate::browser;
use crate::components::decision_table::DecisionTable;
use crate::components::node_pen::NodePen;
use crate::components::sheep::SheepCard;
use crate::sim::engine::Sim;
use crate::sim::input::{InputError, parse_count, parse_cpu_input, parse_labels, parse_memory_input, parse_taints, parse_tolerations};
use crate::sim::lab::{BIG_CLUSTER, LabAction, LabState, NodeSpec, PodBatch};
use crate::view::stages::{Layout, layout, pen_of, percent};
use crate::view::time::one_decimal;

/// Above this many nodes the pens give way to a heat map.
const PENS_UP_TO: usize = 60;
/// How often Play steps.
const PLAY_EVERY_MS: u32 = 400;
/// Pods listed per scheduling queue; the rest are counted.
const QUEUE_ROWS: usize = 15;

#[derive(Debug, Clone, PartialEq)]
struct NodeForm {
    name: String,
    cpu: String,
    memory: String,
    pods: String,
    labels: String,
    taints: String,
}

impl NodeForm {
    fn spec(&self) -> Result<NodeSpec, InputError> {
        Ok(NodeSpec {
            name: self.name.clone(),
            cpu: parse_cpu_input(&self.cpu)?,
            memory: parse_memory_input(&self.memory)?,
            pods: parse_count(&self.pods, "max pods", 1)?,
            labels: parse_labels(&self.labels)?,
            taints: parse_taints(&self.taints)?,
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
struct PodForm {
    prefix: String,
    count: String,
    cpu: String,
    memory: String,
    selector: String,
    tolerations: String,
}

impl PodForm {
    fn batch(&self) -> Result<PodBatch, InputError> {
        let prefix = self.prefix.trim();
        Ok(PodBatch {
            prefix: if prefix.is_empty() { "web".to_string() } else { prefix.to_string() },
            count: parse_count(&self.count, "count", 1)? as usize,
            cpu: parse_cpu_input(&self.cpu)?,
            memory: parse_memory_input(&self.memory)?,
            node_selector: parse_labels(&self.selector)?,
            tolerations: parse_tolerations(&self.tolerations)?,
        })
    }
}

/// Which schedulers are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Show {
    One(usize),
    Both,
}

/// A text input bound to one field of a form kept in a `use_state`.
fn field<F: Clone + PartialEq + 'static>(
    form: &UseStateHandle<F>,
    label: &'static str,
    value: &str,
    placeholder: &'static str,
    testid: &'static str,
    set: fn(&mut F, String),
) -> Html {
    let form = form.clone();
    let oninput = Callback::from(move |e: InputEvent| {
        let mut next = (*form).clone();
        set(&mut next, e.target_unchecked_into::<HtmlInputElement>().value());
        form.set(next);
    });
    html! {
        <label class="field">
            <span>{ label }</span>
            <input value={value.to_string()} {placeholder} {oninput} data-testid={testid} />
        </label>
    }
}

#[component]
pub fn Simulator() -> Html {
    let lab = use_reducer(LabState::default);
    {
        // Open on the three-node preset, so there is something to schedule on at once.
        let lab = lab.clone();
        use_effect_with((), move |_| lab.dispatch(LabAction::Small(browser::now())));
    }
    let node_form = use_state(|| NodeForm {
        name: String::new(),
        cpu: "2".into(),
        memory: "4Gi".into(),
        pods: "110".into(),
        labels: String::new(),
        taints: String::new(),
    });
    let pod_form = use_state(|| PodForm {
        prefix: "web".into(),
        count: "5".into(),
        cpu: "250m".into(),
        memory: "256Mi".into(),
        selector: String::new(),
        tolerations: String::new(),
    });
    let delete_form = use_state(String::new);
    let error = use_state(|| None::<String>);
    let show = use_state(|| Show::Both);
    let playing = use_state(|| false);
    let per_step = use_state(|| 1usize);
    let last_step_ms = use_state(|| None::<f64>);

    let step = {
        let (lab, per_step, last_step_ms) = (lab.clone(), per_step.clone(), last_step_ms.clone());
        Callback::from(move |_: ()| {
            let started = browser::performance_now();
            lab.dispatch(LabAction::Step { decisions: *per_step, now: browser::now() });
            last_step_ms.set(Some(browser::performance_now() - started));
        })
    };
    {
        let (step, playing_handle, shared) = (step.clone(), playing.clone(), lab.lab.clone());
        use_effect_with(*playing, move |playing| {
            let interval = playing.then(|| {
                Interval::new(PLAY_EVERY_MS, move || {
                    if shared.borrow().has_work() {
                        step.emit(());
                    } else {
                        playing_handle.set(false);
                    }
                })
            });
            move || drop(interval)
        });
    }

    let add_node = {
        let (lab, form, error) = (lab.clone(), node_form.clone(), error.clone());
        Callback::from(move |e: SubmitEvent| {
            e.prevent_default();
            match form.spec() {
                Ok(spec) => {
                    lab.dispatch(LabAction::AddNode(spec, browser::now()));
                    let mut next = (*form).clone();
                    next.name.clear();
                    form.set(next);
                    error.set(None);
                }
                Err(problem) => error.set(Some(format!("cannot add the node: {problem}"))),
            }
        })
    };
    let add_pods = {
        let (lab, form, error) = (lab.clone(), pod_form.clone(), error.clone());
        Callback::from(move |e: SubmitEvent| {
            e.prevent_default();
            match form.batch() {
                Ok(batch) => {
                    lab.dispatch(LabAction::AddPods(batch, browser::now()));
                    error.set(None);
                }
                Err(problem) => error.set(Some(format!("cannot add pods: {problem}"))),
            }
        })
    };
    let delete_pods = {
        let (lab, form, error) = (lab.clone(), delete_form.clone(), error.clone());
        Callback::from(move |e: SubmitEvent| {
            e.prevent_default();
            let name = form.trim().to_string();
            if lab.lab.borrow().pods_named_or_owned_by(&name) == 0 {
                error.set(Some(format!("cannot delete: no pod is named {name:?} or owned by {name:?}")));
                return;
            }
            lab.dispatch(LabAction::DeletePods(name, browser::now()));
            error.set(None);
        })
    };
    let preset = |action: fn() -> LabAction| {
        let (lab, playing) = (lab.clone(), playing.clone());
        Callback::from(move |_| {
            playing.set(false);
            lab.dispatch(action());
        })
    };
    let on_small = preset(|| LabAction::Small(browser::now()));
    let on_big = preset(|| LabAction::Big(browser::now()));
    let on_reset = preset(|| LabAction::Reset);
    let on_step = {
        let step = step.clone();
        Callback::from(move |_| step.emit(()))
    };
    let on_play = {
        let playing = playing.clone();
        Callback::from(move |_| playing.set(!*playing))
    };
    let on_per_step = {
        let per_step = per_step.clone();
        Callback::from(move |e: Event| {
            per_step.set(e.target_unchecked_into::<HtmlSelectElement>().value().parse().unwrap_or(1));
        })
    };
    let show_button = |value: Show, label: &'static str, testid: &'static str| {
        let show = show.clone();
        let active = *show == value;
        html! {
            <button type="button" class={classes!(active.then_some("active"))} onclick={Callback::from(move |_| show.set(value))} data-testid={testid}>
                { label }
            </button>
        }
    };
    let on_cordon = {
        let lab = lab.clone();
        Callback::from(move |(node, cordoned): (String, bool)| lab.dispatch(LabAction::Cordon { node, cordoned, now: browser::now() }))
    };

    let state = lab.lab.borrow();
    let shown: Vec<&Sim> = match *show {
        Show::One(i) => vec![&state.sims[i]],
        Show::Both => state.sims.iter().collect(),
    };
    let nf = &*node_form;
    let pf = &*pod_form;

    html! {
        <section class="page simulator" data-testid="simulator">
            <header class="page-head">
                <h1>{ "Scheduler simulator" }</h1>
                <span class="muted">
                    { "The server's own scheduler and scheduling queue (shared::scheduler), running in this page with no server: \
                       back-off from 1 s to 10 s, unschedulable pods parked until a cluster change or the 5-minute flush, \
                       and every bind checked for room as the server checks it." }
                </span>
            </header>
            <div class="sim-controls">
                <div class="sim-row">
                    <button type="button" onclick={on_small} data-testid="sim-small">{ "3 nodes" }</button>
                    <button type="button" onclick={on_big} data-testid="sim-big">{ format!("{BIG_CLUSTER} nodes") }</button>
                    <button type="button" onclick={on_reset} data-testid="sim-reset">{ "Reset" }</button>
                    <span class="sep"></span>
                    <button type="button" class="primary" onclick={on_step} data-testid="sim-step">{ "Step" }</button>
                    <button type="button" onclick={on_play} data-testid="sim-play">{ if *playing { "Pause" } else { "Play" } }</button>
                    <label class="field inline">
                        <span>{ "decisions per step" }</span>
                        <select onchange={on_per_step} data-testid="sim-per-step">
                            { for [1usize, 10, 100].iter().map(|n| html! { <option value={n.to_string()} selected={*per_step == *n}>{ n }</option> }) }
                        </select>
                    </label>
                    <span class="sep"></span>
                    { show_button(Show::One(0), "Spread", "sim-show-spread") }
                    { show_button(Show::One(1), "Bin-pack", "sim-show-bin-pack") }
                    { show_button(Show::Both, "Side by side", "sim-show-both") }
                    if let Some(ms) = *last_step_ms {
                        <span class="muted" data-testid="sim-step-time">{ format!("last step {} ms (both schedulers)", one_decimal((ms * 10.0).round() as i64)) }</span>
                    }
                </div>
                <form class="sim-row" onsubmit={add_node}>
                    <strong>{ "Node" }</strong>
                    { field(&node_form, "name", &nf.name, "node-N", "sim-node-name", |f, v| f.name = v) }
                    { field(&node_form, "CPU", &nf.cpu, "2 or 2000m", "sim-node-cpu", |f, v| f.cpu = v) }
                    { field(&node_form, "memory", &nf.memory, "4Gi", "sim-node-memory", |f, v| f.memory = v) }
                    { field(&node_form, "max pods", &nf.pods, "110", "sim-node-pods", |f, v| f.pods = v) }
                    { field(&node_form, "labels", &nf.labels, "zone=a, gpu=true", "sim-node-labels", |f, v| f.labels = v) }
                    { field(&node_form, "taints", &nf.taints, "gpu=true:NoSchedule", "sim-node-taints", |f, v| f.taints = v) }
                    <button type="submit" data-testid="sim-add-node">{ "Add node" }</button>
                </form>
                <form class="sim-row" onsubmit={add_pods}>
                    <strong>{ "Pods" }</strong>
                    { field(&pod_form, "name / owner", &pf.prefix, "web", "sim-pod-prefix", |f, v| f.prefix = v) }
                    { field(&pod_form, "count", &pf.count, "5", "sim-pod-count", |f, v| f.count = v) }
                    { field(&pod_form, "CPU", &pf.cpu, "250m", "sim-pod-cpu", |f, v| f.cpu = v) }
                    { field(&pod_form, "memory", &pf.memory, "256Mi", "sim-pod-memory", |f, v| f.memory = v) }
                    { field(&pod_form, "node selector", &pf.selector, "gpu=true", "sim-pod-selector", |f, v| f.selector = v) }
                    { field(&pod_form, "tolerations", &pf.tolerations, "gpu=true:NoSchedule", "sim-pod-tolerations", |f, v| f.tolerations = v) }
                    <button type="submit" data-testid="sim-add-pods">{ "Add pods" }</button>
                </form>
                <form class="sim-row" onsubmit={delete_pods}>
                    <strong>{ "Delete" }</strong>
                    { field(&delete_form, "pod, or owner for all its pods", &delete_form, "web-3 or web", "sim-delete-name", |f, v| *f = v) }
                    <button type="submit" data-testid="sim-delete">{ "Delete pods" }</button>
                </form>
                if let Some(message) = &*error { <p class="error" data-testid="sim-error">{ message }</p> }
            </div>
            <div class={classes!("sim-columns", (shown.len() > 1).then_some("two"))}>
                { for shown.iter().map(|sim| sim_column(sim, &on_cordon)) }
            </div>
            <div class={classes!("sim-columns", (shown.len() > 1).then_some("two"))}>
                { for shown.iter().map(|sim| queue_list(sim)) }
            </div>
            <div class={classes!("sim-columns", (shown.len() > 1).then_some("two"))}>
                { for shown.iter().map(|sim| html! {
                    <div class="sim-decision">
                        <h2>{ format!("{}: last decision", sim.profile) }</h2>
                        { match &sim.last {
                            Some(explanation) => html! { <DecisionTable explanation={explanation.clone()} max_rows={40} /> },
                            None => html! { <p class="muted">{ "No decision yet: add nodes and pods, then Step." }</p> },
                        } }
                    </div>
                }) }
            </div>
            <div class={classes!("sim-columns", (shown.len() > 1).then_some("two"))}>
                { for shown.iter().map(|sim| history(sim)) }
            </div>
        </section>
    }
}

fn sim_column(sim: &Sim, on_cordon: &Callback<(String, bool)>) -> Html {
    let view = layout(&sim.nodes, &sim.pods, None, None);
    // The pods the simulator scheduled; the large preset's pre-placed fillers live elsewhere.
    let running = sim.pods.values().filter(|p| p.metadata.namespace == DEFAULT_NAMESPACE && p.stage() == PodStage::Running).count();
    let summary = format!(
        "{} node(s) · {} pod(s) running · {} queued · {} backing off · {} unschedulable · next start index {}",
        sim.nodes.len(),
        running,
        sim.queued(),
        sim.backing_off(),
        sim.parked(),
        sim.next_start_index()
    );
    html! {
        <div class="sim-column" data-testid="sim-column" data-profile={sim.profile.clone()}>
            <h2>{ format!("Profile {}", sim.profile) }</h2>
            <p class="muted" data-testid="sim-summary">{ summary }</p>
            if sim.nodes.len() <= PENS_UP_TO {
                <section class="meadow">
                    <header><strong>{ "Meadow" }</strong><span class="muted">{ " · queued or unschedulable" }</span></header>
                    <div class="flock">
                        { for view.meadow.iter().map(|pod| html! { <SheepCard key={pod.metadata.key()} pod={pod.clone()} /> }) }
                    </div>
                </section>
                <div class="pens">
                    { for view.pens.iter().map(|pen| {
                        let name = pen.node.metadata.name.clone();
                        let cordoned = pen.node.status.unschedulable;
                        let onclick = { let on_cordon = on_cordon.clone(); Callback::from(move |_| on_cordon.emit((name.clone(), !cordoned))) };
                        html! {
                            <div class="sim-pen" key={pen.node.metadata.name.clone()}>
                                <NodePen pen={pen.clone()} />
                                <button class="link" {onclick} data-testid="sim-cordon">{ if cordoned { "uncordon" } else { "cordon" } }</button>
                            </div>
                        }
                    }) }
                </div>
            } else {
                { heat_map(sim, &view) }
            }
        </div>
    }
}

/// Every node as a cell shaded by CPU requested; the last decision's evaluated nodes outlined
/// and its winner marked. Shows how a decision covers only a window of a large cluster, and
/// how that window rotates from one decision to the next.
fn heat_map(sim: &Sim, view: &Layout) -> Html {
    let mut evaluated = vec![false; view.pens.len()];
    for node in sim.last.iter().flat_map(|e| &e.nodes) {
        if let Some(i) = pen_of(&view.pens, &node.node) {
            evaluated[i] = true;
        }
    }
    let winner = sim.last.as_ref().and_then(|e| e.selected.as_deref());
    let coverage = sim.last.as_ref().map(|e| {
        format!(
            "Last decision: evaluated {} of {} nodes ({}%) from index {}, stopping once {} were feasible \
             (percentageOfNodesToScore, adaptive: max(5, 50 − nodes/125) % of the nodes); {} infeasible node(s) passed over on the way. \
             The next decision starts where this one stopped.",
            e.nodes_evaluated,
            e.total_nodes,
            percent(e.nodes_evaluated as i64, e.total_nodes as i64),
            e.start_index,
            e.nodes_to_find,
            e.nodes_evaluated - e.feasible_nodes
        )
    });
    html! {
        <div class="heat">
            if let Some(text) = coverage { <p data-testid="sim-coverage">{ text }</p> }
            <div class="heat-grid" data-testid="sim-heat-map">
                { for view.pens.iter().zip(evaluated).map(|(pen, evaluated)| {
                    let level = percent(pen.usage.requested.cpu, pen.usage.allocatable.cpu) / 25;
                    let name = pen.node.metadata.name.as_str();
                    let mark = if Some(name) == winner { "win" } else if evaluated { "seen" } else { "" };
                    html! { <i class={classes!("c", format!("l{level}"), (!mark.is_empty()).then_some(mark))}></i> }
                }) }
            </div>
            <p class="muted legend-line">
                <i class="c l0"></i>{ " <25% CPU requested " }<i class="c l1"></i>{ " 25–50% " }<i class="c l2"></i>{ " 50–75% " }<i class="c l3"></i>{ " 75–99% " }<i class="c l4"></i>{ " full " }
                <i class="c l0 seen"></i>{ " evaluated by the last decision " }<i class="c l0 win"></i>{ " chosen" }
            </p>
        </div>
    }
}

/// Every pod in the queue, where it waits and why it came back, in the words of `sheepctl
/// describe`, as of the last action.
fn queue_list(sim: &Sim) -> Html {
    let mut waiting = sim.waiting();
    let rows: Vec<(&str, QueueStatus)> = waiting.by_ref().take(QUEUE_ROWS).collect();
    let more = waiting.count();
    html! {
        <div class="sim-queue">
            <h2>{ format!("{}: scheduling queue", sim.profile) }</h2>
            if rows.is_empty() {
                <p class="muted" data-testid="sim-queue-empty">{ "Empty: no pod waits for a node." }</p>
            } else {
                <table class="grid" data-testid="sim-queue">
                    <thead><tr><th>{ "Pod" }</th><th>{ "Where it waits, as of the last action" }</th></tr></thead>
                    <tbody>
                        { for rows.iter().map(|(pod, status)| html! {
                            <tr class={classes!((status.state == QueueState::Unschedulable).then_some("warning"))} data-testid="sim-queue-row">
                                <td>{ *pod }</td><td>{ status.describe() }</td>
                            </tr>
                        }) }
                    </tbody>
                </table>
                if more > 0 { <p class="muted">{ format!("… and {more} more") }</p> }
            }
        </div>
    }
}

fn history(sim: &Sim) -> Html {
    html! {
        <div class="sim-history">
            <h2>{ format!("{}: decisions", sim.profile) }</h2>
            <table class="grid" data-testid="sim-history">
                <thead><tr><th>{ "Step" }</th><th>{ "Pod" }</th><th>{ "Node" }</th><th>{ "Queue" }</th><th>{ "Evaluated" }</th><th>{ "Start" }</th><th>{ "Message" }</th></tr></thead>
                <tbody>
                    { for sim.history.iter().take(15).map(|o| html! {
                        <tr class={classes!(o.node.is_none().then_some("warning"))}>
                            <td class="num">{ o.step }</td><td>{ &o.pod }</td><td>{ o.node.clone().unwrap_or_else(|| "—".into()) }</td>
                            <td>{ o.queue.as_ref().map(QueueStatus::describe).unwrap_or_default() }</td>
                            <td class="num">{ format!("{}/{}", o.evaluated, o.total) }</td><td class="num">{ o.start_index }</td><td>{ &o.message }</td>
                        </tr>
                    }) }
                </tbody>
            </table>
        </div>
    }
}
