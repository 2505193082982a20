//! A node drawn as a pen: its condition, CPU, memory and pod bars, and its sheep.

use std::rc::Rc;

use shared::model::{format_cpu, format_memory};
use shared::words::node_status;
use yew::prelude::*;

use crate::components::sheep::SheepCard;
use crate::view::{Pen, Usage, percent};

#[derive(Properties, PartialEq)]
pub struct BarProps {
    pub label: AttrValue,
    pub used: i64,
    pub total: i64,
    pub text: AttrValue,
}

/// A usage bar: green, amber past 70 %, red past 90 %.
#[component]
pub fn Bar(props: &BarProps) -> Html {
    let pct = percent(props.used, props.total);
    let level = match pct {
        0..=70 => "ok",
        71..=90 => "high",
        _ => "full",
    };
    html! {
        <div class="bar" title={format!("{}: {} ({pct}%)", props.label, props.text)}>
            <span class="bar-label">{ &props.label }</span>
            <span class="bar-track"><span class={classes!("bar-fill", level)} style={format!("width: {pct}%")}></span></span>
            <span class="bar-text">{ &props.text }</span>
        </div>
    }
}

/// The three bars of a node's usage.
pub fn usage_bars(usage: &Usage) -> Html {
    html! {
        <div class="bars">
            <Bar label="CPU" used={usage.cpu} total={usage.cpu_allocatable}
                 text={format!("{} / {}", format_cpu(usage.cpu), format_cpu(usage.cpu_allocatable))} />
            <Bar label="Memory" used={usage.memory} total={usage.memory_allocatable}
                 text={format!("{} / {}", format_memory(usage.memory), format_memory(usage.memory_allocatable))} />
            <Bar label="Pods" used={usage.pods} total={usage.pods_allocatable}
                 text={format!("{} / {}", usage.pods, usage.pods_allocatable)} />
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
