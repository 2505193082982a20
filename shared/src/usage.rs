//! What the pods on a node request and how much of the node that is: the one sum and the
//! one percentage that the scheduler's explanations, `sheepctl` and the dashboard show.
//! A pod's own sum is [`PodSpec::requests`](crate::model::PodSpec::requests).

use std::collections::BTreeMap;

use crate::model::{Pod, ResourceRequirements};

/// What the pods counted on a node request: how many, millicores and bytes. Sums saturate:
/// validation's bounds keep real sums far below i64::MAX.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Requested {
    pub pods: i64,
    pub cpu: i64,
    pub memory: i64,
}

impl Requested {
    /// Counts one more pod's requests.
    pub fn add(&mut self, pod: &Pod) {
        self.add_requests(pod.spec.requests());
    }

    /// Counts one more pod whose requests (its [`PodSpec::requests`](crate::model::PodSpec::requests))
    /// are `requests`: for a caller that keeps them, as the scheduler's cache does.
    #[inline]
    pub fn add_requests(&mut self, requests: ResourceRequirements) {
        self.pods = self.pods.saturating_add(1);
        self.cpu = self.cpu.saturating_add(requests.cpu);
        self.memory = self.memory.saturating_add(requests.memory);
    }

    /// Takes back a pod counted with `requests` (from a saturated sum too).
    #[inline]
    pub fn remove_requests(&mut self, requests: ResourceRequirements) {
        self.pods = self.pods.saturating_sub(1);
        self.cpu = self.cpu.saturating_sub(requests.cpu);
        self.memory = self.memory.saturating_sub(requests.memory);
    }
}

/// Whether a pod's requests count against its node: it is bound and has not finished.
pub fn counts_on_node(pod: &Pod) -> bool {
    !pod.spec.node_name.is_empty() && !pod.status.phase.is_terminal()
}

/// The requests of the pods that count on each node, by node name.
pub fn requested_by_node<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> BTreeMap<String, Requested> {
    let mut by_node: BTreeMap<String, Requested> = BTreeMap::new();
    for pod in pods.into_iter().filter(|p| counts_on_node(p)) {
        by_node.entry(pod.spec.node_name.clone()).or_default().add(pod);
    }
    by_node
}

/// `part` of `whole` in whole percent, truncated toward zero as `kubectl describe node`
/// prints its Allocated resources (`int64(fraction * 100)`): 2 of 3 is 66. 0 when `whole`
/// is not positive; more than 100 for an overcommitted node (callers that draw bars clamp).
pub fn percent(part: i64, whole: i64) -> i64 {
    if whole <= 0 {
        return 0;
    }
    // In i128: `part * 100` passes i64::MAX for any part above i64::MAX / 100.
    let percent = i128::from(part) * 100 / i128::from(whole);
    i64::try_from(percent).unwrap_or(if percent < 0 { i64::MIN } else { i64::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Container, PodPhase, ResourceRequirements};

    fn pod(node: &str, phase: PodPhase, cpu: i64, memory: i64) -> Pod {
        let mut pod = Pod::default();
        pod.spec.node_name = node.to_string();
        pod.spec.containers = vec![Container { resources: ResourceRequirements { cpu, memory }, ..Container::default() }];
        pod.status.phase = phase;
        pod
    }

    #[test]
    fn bound_unfinished_pods_count_on_their_node() {
        let pods = [
            pod("a", PodPhase::Running, 250, 64 << 20),
            pod("a", PodPhase::Pending, 500, 128 << 20),
            pod("a", PodPhase::Succeeded, 1000, 1 << 30),
            pod("b", PodPhase::Failed, 1000, 1 << 30),
            pod("", PodPhase::Pending, 1000, 1 << 30),
        ];
        let by_node = requested_by_node(&pods);
        assert_eq!(by_node.get("a"), Some(&Requested { pods: 2, cpu: 750, memory: 192 << 20 }));
        assert_eq!(by_node.get("b"), None, "a finished pod holds nothing");
        assert_eq!(by_node.len(), 1, "an unbound pod is on no node");
    }

    #[test]
    fn sums_saturate_instead_of_wrapping() {
        let big = pod("a", PodPhase::Running, i64::MAX, i64::MAX);
        let by_node = requested_by_node([&big, &big]);
        assert_eq!(by_node["a"], Requested { pods: 2, cpu: i64::MAX, memory: i64::MAX });
    }

    #[test]
    fn percent_truncates_as_kubectl_describe_node() {
        assert_eq!(percent(2, 3), 66, "truncated, not rounded");
        assert_eq!(percent(1, 3), 33);
        assert_eq!(percent(999, 1000), 99);
        assert_eq!(percent(750, 1000), 75);
        assert_eq!(percent(3, 2), 150, "overcommitted");
        assert_eq!(percent(1, 0), 0);
        assert_eq!(percent(1, -5), 0);
        assert_eq!(percent(i64::MAX, i64::MAX), 100, "no overflow on the way");
        assert_eq!(percent(i64::MAX, 1), i64::MAX);
    }
}
