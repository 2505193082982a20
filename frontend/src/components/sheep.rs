//! A pod drawn as a sheep, its wool coloured by stage; and the plain sheep of the logo.

use std::rc::Rc;

use shared::model::{Pod, PodStage};
use yew::prelude::*;

use crate::route::Route;
use crate::view::{stage_hint, stage_id, stage_name};

/// The sheep drawing: wool (coloured by the parent's stage class), head and legs.
#[component]
pub fn SheepIcon() -> Html {
    html! {
        <svg class="sheep-icon" viewBox="0 0 44 32" aria-hidden="true">
            <g class="legs"><rect x="12" y="22" width="3" height="8" rx="1" /><rect x="27" y="22" width="3" height="8" rx="1" /></g>
            <g class="wool">
                <circle cx="14" cy="15" r="7" /><circle cx="21" cy="11" r="8" /><circle cx="29" cy="15" r="7" />
                <circle cx="18" cy="19" r="6" /><circle cx="26" cy="19" r="6" />
            </g>
            <ellipse class="head" cx="37" cy="14" rx="5" ry="4" />
        </svg>
    }
}

#[derive(Properties)]
pub struct SheepCardProps {
    pub pod: Rc<Pod>,
    /// Show `namespace/` before the name (when every namespace is shown).
    #[prop_or_default]
    pub show_namespace: bool,
}

/// Cards compare by pointer: the cache replaces a pod's `Rc` exactly when the pod changes.
impl PartialEq for SheepCardProps {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.pod, &other.pod) && self.show_namespace == other.show_namespace
    }
}

#[component]
pub fn SheepCard(props: &SheepCardProps) -> Html {
    let pod = &props.pod;
    let stage = pod.stage();
    let meta = &pod.metadata;
    let route = Route::Pod { namespace: meta.namespace.clone(), name: meta.name.clone() };
    let name = if props.show_namespace { meta.key() } else { meta.name.clone() };
    // "Pending" alone hides the seed's distinction: say which Pending this is.
    let status = match stage {
        PodStage::Unschedulable => "Unschedulable".to_string(),
        _ => pod.display_status(),
    };
    let title = format!("{} · {}: {}", meta.key(), stage_name(stage), stage_hint(stage));
    let terminating = meta.deletion_timestamp.is_some();
    html! {
        <a class={classes!("sheep", format!("stage-{}", stage_id(stage)), terminating.then_some("terminating"))}
           href={route.href()} {title}
           data-testid="pod-card" data-pod={meta.key()} data-stage={stage_id(stage)}>
            <SheepIcon />
            <span class="sheep-name">{ name }</span>
            <span class="sheep-status">{ status }</span>
        </a>
    }
}

/// A stage's name as a coloured badge.
#[derive(Properties, PartialEq)]
pub struct StageBadgeProps {
    pub stage: PodStage,
}

#[component]
pub fn StageBadge(props: &StageBadgeProps) -> Html {
    html! {
        <span class={classes!("badge", format!("stage-{}", stage_id(props.stage)))} title={stage_hint(props.stage)}
              data-testid="stage-badge" data-stage={stage_id(props.stage)}>
            { stage_name(props.stage) }
        </span>
    }
}
