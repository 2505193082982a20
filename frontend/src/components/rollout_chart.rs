//! The live chart of a deployment's rollout: pods, updated, ready and unavailable replicas
//! over the last minutes as steps, over the band its strategy allows (up to
//! `replicas + maxSurge` pods, at least `replicas − maxUnavailable` available). The page
//! samples; this draws, and redraws each second so that the lines reach now.

use std::collections::VecDeque;
use std::rc::Rc;

use gloo_timers::callback::Interval;
use yew::prelude::*;

use crate::browser;
use crate::view::rollout::{CHART_HEIGHT, CHART_WIDTH, PLOT_BOTTOM, PLOT_LEFT, PLOT_RIGHT, Sample, chart_layout, window_label};

/// How often the chart moves on while nothing changes.
const REDRAW_MS: u32 = 1000;

#[derive(Properties)]
pub struct RolloutChartProps {
    pub samples: Rc<VecDeque<Sample>>,
}

/// The page replaces the `Rc` exactly when a sample is added.
impl PartialEq for RolloutChartProps {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.samples, &other.samples)
    }
}

#[component]
pub fn RolloutChart(props: &RolloutChartProps) -> Html {
    let redraw = use_force_update();
    use_effect_with((), move |_| {
        let interval = Interval::new(REDRAW_MS, move || redraw.force_update());
        move || drop(interval)
    });
    let (Some(layout), Some(last)) = (chart_layout(&props.samples, browser::now().timestamp_millis()), props.samples.back()) else {
        return Html::default();
    };
    let label_y = (CHART_HEIGHT - 6).to_string();
    html! {
        <figure class="rollout" data-testid="rollout">
            <svg class="rollout-chart" data-testid="rollout-chart" data-samples={props.samples.len().to_string()}
                viewBox={format!("0 0 {CHART_WIDTH} {CHART_HEIGHT}")} role="img"
                aria-label="Pods, updated, ready and unavailable replicas over time, over the band the strategy allows">
                <polygon class="band" points={layout.band.clone()} data-testid="rollout-band"
                    data-ceiling={last.ceiling.to_string()} data-floor={last.floor.to_string()} />
                <line class="axis" x1={PLOT_LEFT.to_string()} y1={PLOT_BOTTOM.to_string()} x2={PLOT_RIGHT.to_string()} y2={PLOT_BOTTOM.to_string()} />
                <text class="tick" x={(PLOT_LEFT - 6).to_string()} y={(layout.y(layout.top_count) + 4).to_string()} text-anchor="end">
                    { layout.top_count }
                </text>
                <text class="tick" x={(PLOT_LEFT - 6).to_string()} y={(PLOT_BOTTOM + 4).to_string()} text-anchor="end">{ "0" }</text>
                { for layout.lines.iter().map(|(series, points)| html! {
                    <polyline class={format!("line series-{}", series.name())} points={points.clone()}
                        data-testid="rollout-series" data-series={series.name()} data-value={series.value(last).to_string()} />
                }) }
                <text class="tick" x={PLOT_LEFT.to_string()} y={label_y.clone()}>{ window_label(layout.window_ms) }</text>
                <text class="tick" x={PLOT_RIGHT.to_string()} y={label_y} text-anchor="end">{ "now" }</text>
            </svg>
            <figcaption class="legend">
                { for layout.lines.iter().map(|(series, _)| html! {
                    <span class={format!("series-{}", series.name())}><i class="swatch"></i>{ format!("{} {}", series.name(), series.value(last)) }</span>
                }) }
                <span class="band-key"><i class="swatch"></i>
                    { format!("allowed: at most {} pods (replicas + maxSurge), at least {} available (replicas − maxUnavailable)", last.ceiling, last.floor) }
                </span>
            </figcaption>
        </figure>
    }
}
