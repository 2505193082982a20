//! The scheduler's decision table: a row per evaluated node, a column per filter and per
//! score plugin, the winner highlighted. Used by the pod detail page and the simulator.

use std::rc::Rc;

use shared::scheduler::{Explanation, Verdict};
use yew::prelude::*;

use crate::view::decision_table::decision_table;

#[derive(Properties)]
pub struct DecisionTableProps {
    pub explanation: Rc<Explanation>,
    /// Rows beyond this many are summarised (the 5,000-node simulator).
    #[prop_or(200)]
    pub max_rows: usize,
}

impl PartialEq for DecisionTableProps {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.explanation, &other.explanation) && self.max_rows == other.max_rows
    }
}

#[component]
pub fn DecisionTable(props: &DecisionTableProps) -> Html {
    let e = &props.explanation;
    let table = use_memo(props.explanation.clone(), |e| decision_table(e));
    let hidden = table.rows.len().saturating_sub(props.max_rows);
    html! {
        <div class="decision" data-testid="decision-table" data-selected={e.selected.clone().unwrap_or_default()}>
            <p class={classes!("decision-message", if e.selected.is_some() { "ok" } else { "error" })} data-testid="decision-message">
                { &e.message }
            </p>
            <p class="muted" data-testid="decision-coverage">
                { format!(
                    "Profile {}: evaluated {} of {} node(s) starting at index {}, looking for {} feasible; {} feasible.",
                    e.profile, e.nodes_evaluated, e.total_nodes, e.start_index, e.nodes_to_find, e.feasible_nodes
                ) }
            </p>
            <div class="table-scroll">
                <table class="grid">
                    <thead>
                        <tr>
                            <th title="evaluation order">{ "#" }</th>
                            <th>{ "Node" }</th>
                            { for table.filters.iter().map(|f| html! { <th class="filter-col">{ f }</th> }) }
                            { for table.scores.iter().map(|s| html! { <th class="score-col">{ s }</th> }) }
                            <th>{ "Total" }</th>
                        </tr>
                    </thead>
                    <tbody>
                        { for table.rows.iter().take(props.max_rows).map(|row| html! {
                            <tr class={classes!(row.selected.then_some("winner"), (!row.feasible).then_some("infeasible"))}
                                data-testid="decision-row" data-node={row.node.clone()} data-selected={row.selected.to_string()}>
                                <td class="num">{ row.evaluated }</td>
                                <td><strong>{ &row.node }</strong>{ if row.selected { " ★" } else { "" } }</td>
                                { for row.filters.iter().map(|cell| match cell.verdict {
                                    Verdict::Passed => html! { <td class="pass" title={cell.detail.clone()}>{ "✓" }</td> },
                                    Verdict::Failed => html! {
                                        <td class="fail" title={cell.detail.clone()}>{ format!("✗ {}", cell.reason) }</td>
                                    },
                                    Verdict::Skipped => html! { <td class="skip" title={cell.detail.clone()}>{ "–" }</td> },
                                }) }
                                { for row.scores.iter().map(|cell| match cell {
                                    Some(s) => html! {
                                        <td class="num" title={s.detail.clone()}>{ format!("{} × {} = {}", s.raw, s.weight, s.weighted) }</td>
                                    },
                                    None => html! { <td class="skip">{ "" }</td> },
                                }) }
                                <td class="num total">{ row.total.map(|t| t.to_string()).unwrap_or_default() }</td>
                            </tr>
                        }) }
                    </tbody>
                </table>
            </div>
            if hidden > 0 { <p class="muted">{ format!("… and {hidden} more evaluated node(s) not shown.") }</p> }
            <p class="hint">{ "Hover a cell for the numbers behind it. Filters run in column order; a node stops at its first failure (–: not run)." }</p>
        </div>
    }
}
