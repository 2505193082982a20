//! The cluster view: the seed's story at a glance. Pods without a node graze in the meadow
//! (waiting for the scheduler, or unschedulable); bound pods stand in their node's pen,
//! coloured by stage, and move live as the watch stream reports changes. Each pen shows what
//! its pods request and, polled apart from the watch, what they use.

use shared::model::PodStage;
use yew::prelude::*;

use crate::components::node_pen::NodePen;
use crate::components::sheep::SheepCard;
use crate::context::{use_cluster, use_node_metrics, use_session};
use crate::route::Route;
use crate::view::stages::{layout, stage_hint, stage_id, stage_name};

/// The meadow shows the oldest this many waiting pods; a burst of a thousand is summarised.
const MEADOW_CARDS: usize = 200;

#[component]
pub fn ClusterView() -> Html {
    let session = use_session();
    let cluster = use_cluster();
    let namespace = session.namespace.clone();
    let metrics = use_node_metrics(&session);
    let view = {
        let (nodes, pods) = (cluster.nodes.clone(), cluster.pods.clone());
        use_memo((nodes, pods, namespace.clone(), metrics), |(nodes, pods, namespace, metrics)| {
            layout(nodes, pods, namespace.as_deref(), metrics.as_deref().map(Vec::as_slice))
        })
    };
    let show_namespace = namespace.is_none();
    let loading = !cluster.pods.listed || !cluster.nodes.listed;
    let meadow_count = view.meadow.len();

    html! {
        <section class="page cluster" data-testid="cluster-view">
            <div class="legend">
                { for view.counts.iter().filter(|(s, n)| *n > 0 || !matches!(s, PodStage::Unknown)).map(|(stage, n)| html! {
                    <span class={classes!("legend-item", format!("stage-{}", stage_id(*stage)))} title={stage_hint(*stage)}
                          data-testid="stage-count" data-stage={stage_id(*stage)}>
                        <span class="swatch"></span>{ format!("{} {n}", stage_name(*stage)) }
                    </span>
                }) }
            </div>
            if loading {
                <p class="muted">{ "Listing pods and nodes…" }</p>
            }
            <section class="meadow" data-testid="meadow">
                <header>
                    <strong>{ "Meadow" }</strong>
                    <span class="muted">{ format!(" · {meadow_count} pod(s) without a node: Pending, node_name \"\"") }</span>
                </header>
                <div class="flock">
                    { for view.meadow.iter().take(MEADOW_CARDS).map(|pod| html! { <SheepCard key={pod.metadata.key()} pod={pod.clone()} {show_namespace} /> }) }
                </div>
                if meadow_count == 0 { <span class="muted">{ "Every pod has a node." }</span> }
                if meadow_count > MEADOW_CARDS {
                    <p class="muted" data-testid="meadow-more">{ format!("… and {} more waiting, newest last.", meadow_count - MEADOW_CARDS) }</p>
                }
            </section>
            <div class="pens">
                { for view.pens.iter().map(|pen| html! {
                    <NodePen key={pen.node.metadata.name.clone()} pen={pen.clone()} {show_namespace} />
                }) }
            </div>
            if view.pens.is_empty() && !loading {
                <p class="empty" data-testid="no-nodes">
                    { "No node has registered yet. Start an agent (shepherd-agent) pointed at this server; its pen appears here as soon as it registers. Meanwhile, the " }
                    <a href={Route::Simulator.href()}>{ "simulator" }</a>{ " runs the same scheduler without one." }
                </p>
            }
            if !view.strays.is_empty() {
                <section class="meadow strays" data-testid="strays">
                    <header><strong>{ "Bound to unknown nodes" }</strong><span class="muted">{ " · their node is gone or not listed yet" }</span></header>
                    <div class="flock">
                        { for view.strays.iter().map(|pod| html! { <SheepCard key={pod.metadata.key()} pod={pod.clone()} {show_namespace} /> }) }
                    </div>
                </section>
            }
        </section>
    }
}
