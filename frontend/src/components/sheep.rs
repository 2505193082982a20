//! A pod drawn as a sheep, its wool coloured by stage; and the plain sheep of the logo.

use std::rc::Rc;

use shared::model::{CONTAINER_CREATING, Pod, PodStage};
use yew::prelude::*;

use crate::route::Route;
use crate::view::stages::{stage_hint, stage_id, stage_name};

/// One sheep: an empty element whose stylesheet image, chosen by the stage class of the
/// card around it, draws the wool in the stage's colour. A function, not a component: it has
/// no state, and each component type adds its own copy of yew's lifecycle code to the bundle.
pub fn sheep_icon() -> Html {
    html! { <i class="sheep-icon" aria-hidden="true"></i> }
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

/// Statuses the stage colour already tells.
const ROUTINE: [&str; 5] = ["Pending", CONTAINER_CREATING, "Running", "Succeeded", "Failed"];

#[component]
pub fn SheepCard(props: &SheepCardProps) -> Html {
    let pod = &props.pod;
    let stage = pod.stage();
    let meta = &pod.metadata;
    let route = Route::Pod { namespace: meta.namespace.clone(), name: meta.name.clone() };
    let name = if props.show_namespace { meta.key() } else { meta.name.clone() };
    // The colour already says the stage: a second line only when there is more to say
    // (ErrImagePull, CrashLoopBackOff, Terminating, a failure reason).
    let status = pod.display_status();
    let status = (!ROUTINE.contains(&status.as_str())).then_some(status);
    let title = format!("{} · {}: {}", meta.key(), stage_name(stage), stage_hint(stage));
    let terminating = meta.deletion_timestamp.is_some();
    html! {
        <a class={classes!("sheep", format!("stage-{}", stage_id(stage)), terminating.then_some("terminating"))}
           href={route.href()} {title}
           data-testid="pod-card" data-pod={meta.key()} data-stage={stage_id(stage)}>
            { sheep_icon() }
            <span class="sheep-name">{ name }</span>
            if let Some(status) = status { <span class="sheep-status" data-testid="pod-status">{ status }</span> }
        </a>
    }
}

/// A stage's name as a coloured badge (a function, as [`sheep_icon`] is).
pub fn stage_badge(stage: PodStage) -> Html {
    html! {
        <span class={classes!("badge", format!("stage-{}", stage_id(stage)))} title={stage_hint(stage)}
              data-testid="stage-badge" data-stage={stage_id(stage)}>
            { stage_name(stage) }
        </span>
    }
}
