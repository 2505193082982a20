//! The scheduler's decision as a table: a column per filter and per score plugin, a row per
//! node it evaluated, the winner first.

use shared::scheduler::{Explanation, NodeExplanation, Verdict};

use shared::sort;

/// One filter's cell: the verdict and the words behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterCell {
    pub verdict: Verdict,
    /// `Insufficient cpu` when failed.
    pub reason: String,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScoreCell {
    pub raw: u32,
    pub weight: u32,
    pub weighted: u64,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionRow {
    pub node: String,
    /// 1-based position in the scheduler's evaluation order.
    pub evaluated: usize,
    pub feasible: bool,
    pub selected: bool,
    /// In [`DecisionTable::filters`] order.
    pub filters: Vec<FilterCell>,
    /// In [`DecisionTable::scores`] order; `None` where the node was not scored.
    pub scores: Vec<Option<ScoreCell>>,
    pub total: Option<u64>,
}

/// The scheduler's explanation as a table: a column per filter and per score plugin, a row
/// per evaluated node; the winner first, then feasible nodes by total, then the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionTable {
    pub filters: Vec<String>,
    pub scores: Vec<String>,
    pub rows: Vec<DecisionRow>,
}

pub fn decision_table(explanation: &Explanation) -> DecisionTable {
    let mut filters: Vec<String> = Vec::new();
    let mut scores: Vec<String> = Vec::new();
    for node in &explanation.nodes {
        for f in &node.filters {
            if !filters.contains(&f.filter) {
                filters.push(f.filter.clone());
            }
        }
        for s in &node.scores {
            if !scores.contains(&s.plugin) {
                scores.push(s.plugin.clone());
            }
        }
    }
    let row = |(i, node): (usize, &NodeExplanation)| DecisionRow {
        node: node.node.clone(),
        evaluated: i + 1,
        feasible: node.feasible,
        selected: node.selected,
        filters: filters
            .iter()
            .map(|name| match node.filters.iter().find(|f| &f.filter == name) {
                Some(f) => FilterCell { verdict: f.verdict, reason: f.reason.clone(), detail: f.detail.clone() },
                None => FilterCell { verdict: Verdict::Skipped, reason: String::new(), detail: "not run".to_string() },
            })
            .collect(),
        scores: scores
            .iter()
            .map(|name| {
                node.scores.iter().find(|s| &s.plugin == name).map(|s| ScoreCell {
                    raw: s.raw,
                    weight: s.weight,
                    weighted: s.weighted,
                    detail: s.detail.clone(),
                })
            })
            .collect(),
        total: node.total,
    };
    let mut rows: Vec<DecisionRow> = explanation.nodes.iter().enumerate().map(row).collect();
    sort::by(&mut rows, |a, b| {
        b.selected.cmp(&a.selected).then(b.feasible.cmp(&a.feasible)).then(b.total.cmp(&a.total)).then(a.evaluated.cmp(&b.evaluated))
    });
    DecisionTable { filters, scores, rows }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::fixtures::explanation;

    #[test]
    fn the_decision_table_has_a_column_per_plugin_and_the_winner_first() {
        let table = decision_table(&explanation());
        assert_eq!(table.filters, ["NodeReady", "NodeResourcesFit", "PodCount"]);
        assert_eq!(table.scores, ["LeastAllocated", "Spread"]);
        let order: Vec<(&str, usize, bool)> = table.rows.iter().map(|r| (r.node.as_str(), r.evaluated, r.selected)).collect();
        assert_eq!(order, [("n3", 3, true), ("n2", 2, false), ("n1", 1, false)]);
        let n1 = &table.rows[2];
        assert_eq!(n1.filters[1].verdict, Verdict::Failed);
        assert_eq!(n1.filters[1].reason, "Insufficient cpu, Insufficient memory");
        assert_eq!(n1.filters[2].verdict, Verdict::Skipped);
        assert_eq!(n1.scores, vec![None, None]);
        assert_eq!(table.rows[0].scores[1].as_ref().unwrap().weighted, 200);
        assert_eq!(table.rows[0].total, Some(290));
    }
}
