//! A node drawn as a pen: its condition, its CPU, memory and pod bars (requested against
//! allocatable, and what the pods use when the node's agent reported it), and its sheep.

use std::rc::Rc;

use shared::quantity::{format_cpu, format_memory};
use shared::words::node_status;
use yew::prelude::*;

use crate::components::sheep::SheepCard;
use crate::view::stages::{Measured, Pen, Usage, percent};

/// A bar: the requests against what the node can give, green, amber past 70 %, red past
/// 90 %, with what the pods use (when measured) as a darker band over it. A function, not a
/// component: it has no state, and each component type adds its own copy of yew's lifecycle
/// code to the bundle.
fn bar(label: &str, used: Option<i64>, requested: i64, total: i64, text: String) -> Html {
    let pct = percent(requested, total);
    let level = match pct {
        0..=70 => "ok",
        71..=90 => "high",
        _ => "full",
    };
    html! {
        <div class="bar" title={format!("{label}: {text} ({pct}% requested)")}>
            <span class="bar-label">{ label }</span>
            <span class="bar-track">
                <span class={classes!("bar-fill", level)} style={format!("width: {pct}%")}></span>
                if let Some(used) = used { <span class="bar-used" style={format!("width: {}%", percent(used, total))}></span> }
            </span>
            <span class="bar-text">{ text }</span>
        </div>
    }
}

/// `250m used / 500m requested / 2` when measured, else `500m / 2` (requested / allocatable).
fn figures(used: Option<i64>, requested: i64, total: i64, format: fn(i64) -> String) -> String {
    match used {
        Some(used) => format!("{} used / {} requested / {}", format(used), format(requested), format(total)),
        None => format!("{} / {}", format(requested), format(total)),
    }
}

/// The three bars of a node's usage, and "usage unknown" when its agent reported none.
pub fn usage_bars(usage: &Usage) -> Html {
    let (requested, allocatable) = (&usage.requested, &usage.allocatable);
    let (cpu, memory, state) = match usage.used {
        Measured::Used { cpu, memory } => (Some(cpu), Some(memory), "measured"),
        Measured::Unknown => (None, None, "unknown"),
        Measured::NotAsked => (None, None, "not-asked"),
    };
    html! {
        <div class="bars" data-testid="usage-bars" data-used={state}>
            { bar("CPU", cpu, requested.cpu, allocatable.cpu, figures(cpu, requested.cpu, allocatable.cpu, format_cpu)) }
            { bar("Memory", memory, requested.memory, allocatable.memory, figures(memory, requested.memory, allocatable.memory, format_memory)) }
            { bar("Pods", None, requested.pods, allocatable.pods, format!("{} / {}", requested.pods, allocatable.pods)) }
            if usage.used == Measured::Unknown { <span class="muted usage-unknown">{ "usage unknown" }</span> }
        </div>
    }
}

#[derive(Properties)]
pub struct NodePenProps {
    pub pen: Pen,
    #[prop_or_default]
    pub show_namespace: bool,
}

/// Equal when the node, the usage and every drawn pod are the same objects.
impl PartialEq for NodePenProps {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.pen, &other.pen);
        Rc::ptr_eq(&a.node, &b.node)
            && a.usage == b.usage
            && a.pods.len() == b.pods.len()
            && a.pods.iter().zip(&b.pods).all(|(x, y)| Rc::ptr_eq(x, y))
            && self.show_namespace == other.show_namespace
    }
}

#[component]
pub fn NodePen(props: &NodePenProps) -> Html {
    let pen = &props.pen;
    let node = &pen.node;
    // The dashboard does not watch leases: it shows the Ready condition, which node
    // lifecycle turns Unknown once the lease goes stale (`shared::readiness`).
    let readiness = node.reported_readiness();
    let condition = node_status(node, readiness);
    let state = if !readiness.is_ready() {
        "not-ready"
    } else if node.status.unschedulable {
        "cordoned"
    } else {
        "ready"
    };
    let taints: Vec<String> = node.status.taints.iter().map(|t| format!("{}={}:{}", t.key, t.value, t.effect)).collect();
    html! {
        <section class={classes!("pen", state)} data-testid="node-pen" data-node={node.metadata.name.clone()}>
            <header>
                <strong>{ &node.metadata.name }</strong>
                <span class={classes!("condition", state)} data-testid="node-condition">{ condition }</span>
                if node.status.node_info.simulated { <span class="tag">{ "simulated" }</span> }
            </header>
            { usage_bars(&pen.usage) }
            if !taints.is_empty() { <div class="taints">{ format!("taints: {}", taints.join(", ")) }</div> }
            <div class="flock">
                { for pen.pods.iter().map(|pod| html! {
                    <SheepCard key={pod.metadata.key()} pod={pod.clone()} show_namespace={props.show_namespace} />
                }) }
            </div>
        </section>
    }
}
