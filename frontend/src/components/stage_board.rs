//! Pods as cards in one column per stage: applying a deployment shows its sheep walk from
//! "waiting for scheduler" to "waiting for agent" to "running" as the watch reports it.

use std::rc::Rc;

use shared::model::{Pod, PodStage};
use yew::prelude::*;

use crate::components::sheep::SheepCard;
use crate::view::stages::{group_by_stage, stage_id, stage_name};

#[derive(Properties)]
pub struct StageBoardProps {
    pub pods: Vec<Rc<Pod>>,
}

impl PartialEq for StageBoardProps {
    fn eq(&self, other: &Self) -> bool {
        self.pods.len() == other.pods.len() && self.pods.iter().zip(&other.pods).all(|(a, b)| Rc::ptr_eq(a, b))
    }
}

/// The seed's path, always shown; the other stages only when a pod is in them.
const PATH: [PodStage; 3] = [PodStage::WaitingForScheduler, PodStage::WaitingForAgent, PodStage::Running];

#[component]
pub fn StageBoard(props: &StageBoardProps) -> Html {
    let groups = group_by_stage(&props.pods);
    html! {
        <div class="stage-board" data-testid="stage-board">
            { for groups.into_iter().filter(|(stage, pods)| PATH.contains(stage) || !pods.is_empty()).map(|(stage, pods)| html! {
                <div class={classes!("stage-column", format!("stage-{}", stage_id(stage)))} data-testid="stage-column" data-stage={stage_id(stage)}>
                    <h3><span class="swatch"></span>{ format!("{} {}", stage_name(stage), pods.len()) }</h3>
                    <div class="flock">
                        { for pods.into_iter().map(|pod| html! { <SheepCard key={pod.metadata.key()} pod={pod.clone()} /> }) }
                    </div>
                </div>
            }) }
        </div>
    }
}
