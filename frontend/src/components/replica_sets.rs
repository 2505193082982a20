//! A deployment's ReplicaSets side by side, old to new: each with its revision, its desired,
//! current and ready counts, and its pods as marks in the revision's colour (filled when
//! ready, hollow while not, faded while terminating).

use yew::prelude::*;

use crate::route::Route;
use crate::view::rollout::{ReplicaSetColumn, revision_class};

/// A function, not a component: it has no state (see `sheep_icon`).
pub fn replica_sets(columns: &[ReplicaSetColumn]) -> Html {
    html! {
        <div class="replica-sets" data-testid="replica-sets">
            { for columns.iter().map(|column| html! {
                <div class={classes!("replica-set", revision_class(column.revision), column.new.then_some("new"))}
                     data-testid="replica-set" data-name={column.name.clone()} data-revision={column.revision.to_string()}
                     data-new={column.new.to_string()} data-ready={column.ready.to_string()}>
                    <h3>
                        <span class="swatch"></span>
                        { format!("revision {} · {}", column.revision, if column.new { "new" } else { "old" }) }
                    </h3>
                    <p class="muted rs-name">{ &column.name }</p>
                    <p class="rs-counts">{ format!("desired {} · current {} · ready {}", column.desired, column.current, column.ready) }</p>
                    <div class="pod-marks">
                        { for column.pods.iter().map(|pod| {
                            let href = Route::Pod { namespace: pod.namespace.clone(), name: pod.name.clone() }.href();
                            let state = if pod.terminating { "terminating" } else if pod.ready { "ready" } else { "not ready" };
                            html! {
                                <a class={classes!("pod-mark", pod.ready.then_some("ready"), pod.terminating.then_some("terminating"))}
                                   {href} title={format!("{} · {state}", pod.name)}
                                   data-testid="rs-pod" data-pod={pod.name.clone()} data-ready={pod.ready.to_string()}></a>
                            }
                        }) }
                    </div>
                </div>
            }) }
        </div>
    }
}
