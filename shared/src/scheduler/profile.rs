//! Scheduler profiles: how much each score plugin weighs, how many nodes to look at and
//! how old a heartbeat may be. `spread` is the default; `bin-pack` fills nodes up.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::plugins::ScorePlugin;
use crate::readiness::DEFAULT_NODE_MONITOR_GRACE;

/// The weight of each score plugin; a plugin with weight 0 is not run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct Weights {
    pub least_allocated: u32,
    pub most_allocated: u32,
    pub balanced_allocation: u32,
    pub spread: u32,
}

impl Weights {
    pub fn of(&self, plugin: ScorePlugin) -> u32 {
        match plugin {
            ScorePlugin::LeastAllocated => self.least_allocated,
            ScorePlugin::MostAllocated => self.most_allocated,
            ScorePlugin::BalancedAllocation => self.balanced_allocation,
            ScorePlugin::Spread => self.spread,
        }
    }

    /// The plugins that count (weight above 0), in [`ScorePlugin::ALL`] order.
    pub fn active(&self) -> impl Iterator<Item = (ScorePlugin, u32)> + '_ {
        ScorePlugin::ALL.into_iter().map(|p| (p, self.of(p))).filter(|&(_, w)| w > 0)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    pub name: String,
    pub weights: Weights,
    /// `None` (or `Some(0)`) follows Kubernetes' adaptive rule, see [`super::num_nodes_to_find`].
    pub percentage_of_nodes_to_score: Option<u32>,
    /// A node whose last heartbeat is older than this is not ready (see [`crate::readiness`]);
    /// the server sets it from `--node-monitor-grace`.
    pub node_monitor_grace: Duration,
}

impl Profile {
    /// The names [`Profile::by_name`] knows.
    pub const NAMES: [&'static str; 2] = ["spread", "bin-pack"];

    /// The default: prefer emptier nodes (LeastAllocated), nodes whose CPU and memory stay
    /// in balance (BalancedAllocation) and, twice as strongly, nodes that run fewer pods of
    /// the same deployment (Spread, weighted 2 like Kubernetes' PodTopologySpread).
    pub fn spread() -> Profile {
        Profile {
            name: "spread".to_string(),
            weights: Weights { least_allocated: 1, most_allocated: 0, balanced_allocation: 1, spread: 2 },
            percentage_of_nodes_to_score: None,
            node_monitor_grace: DEFAULT_NODE_MONITOR_GRACE,
        }
    }

    /// Bin-packing: prefer the fullest node that still fits (MostAllocated). Spread and
    /// BalancedAllocation are off here: both pull pods apart, and with them on an empty
    /// node ties a node with one pod, so nothing would pack.
    pub fn bin_pack() -> Profile {
        Profile {
            name: "bin-pack".to_string(),
            weights: Weights { least_allocated: 0, most_allocated: 1, balanced_allocation: 0, spread: 0 },
            percentage_of_nodes_to_score: None,
            node_monitor_grace: DEFAULT_NODE_MONITOR_GRACE,
        }
    }

    /// `spread` or `bin-pack`.
    pub fn by_name(name: &str) -> Option<Profile> {
        match name {
            "spread" => Some(Profile::spread()),
            "bin-pack" => Some(Profile::bin_pack()),
            _ => None,
        }
    }
}

impl Default for Profile {
    fn default() -> Self {
        Profile::spread()
    }
}
