//! A node drawn as a pen: its condition, CPU, memory and pod bars, and its sheep.

use std::rc::Rc;

use shared::quantity::{format_cpu, format_memory};
use shared::words::node_status;
use yew::prelude::*;

use crate::components::sheep::SheepCard;
use crate::view::stages::{Pen, Usage, percent};

/// A usage bar: green, amber past 70 %, red past 90 %. A function, not a component: it has no
/// state, and each component type adds its own copy of yew's lifecycle code to the bundle.
fn bar(label: &str, used: i64, total: i64, text: String) -> Html {
    let pct = percent(used, total);
    let level = match pct {
        0..=70 => "ok",
        71..=90 => "high",
        _ => "full",
    };
    html! {
        <div class="bar" title={format!("{label}: {text} ({pct}%)")}>
            <span class="bar-label">{ label }</span>
            <span class="bar-track"><span class={classes!("bar-fill", level)} style={format!("width: {pct}%")}></span></span>
            <span class="bar-text">{ text }</span>
        </div>
    }
}

/// The three bars of a node's usage.
pub fn usage_bars(usage: &Usage) -> Html {
    html! {
        <div class="bars">
            { bar("CPU", usage.requested.cpu, usage.allocatable.cpu,
                  format!("{} / {}", format_cpu(usage.requested.cpu), format_cpu(usage.allocatable.cpu))) }
            { bar("Memory", usage.requested.memory, usage.allocatable.memory,
                  format!("{} / {}", format_memory(usage.requested.memory), format_memory(usage.allocatable.memory))) }
            { bar("Pods", usage.requested.pods, usage.allocatable.pods, format!("{} / {}", usage.requested.pods, usage.allocatable.pods)) }
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
