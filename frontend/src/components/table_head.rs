//! The header row of the pages' tables: one function instead of an `html!` per column,
//! whose expansion each table would otherwise carry in the wasm bundle.

use yew::prelude::*;

/// `<thead><tr><th>…</th>…</tr></thead>` with one cell per title.
pub fn table_head(titles: &[&'static str]) -> Html {
    html! {
        <thead><tr>{ for titles.iter().map(|title| html! { <th>{ *title }</th> }) }</tr></thead>
    }
}
