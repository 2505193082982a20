//! Room on a node: whether a pod's requests, pod slot and host ports fit next to what the
//! node's pods already take (NodeResourcesFit, PodCount, NodePorts). The scheduler's filter
//! and the bind's compare-and-swap guard call the same [`room`]; sums saturate, so no
//! request, however large, wraps around into "fits".

use crate::model::{Node, NodeResources, Pod};

use super::cache::{Footprint, Slot, Usage};
use super::explain::room_detail;
use super::plugins::{Failure, HostPort, first_port_conflict};

/// `None` when `footprint` fits next to `usage` and `ports` on a node offering `allocatable`.
#[inline]
pub(crate) fn room(allocatable: &NodeResources, usage: &Usage, ports: &[HostPort], footprint: &Footprint) -> Option<Failure> {
    let (asked, taken) = (&footprint.requests, &usage.requested);
    let cpu = asked.cpu > 0 && taken.cpu.saturating_add(asked.cpu) > allocatable.cpu;
    let memory = asked.memory > 0 && taken.memory.saturating_add(asked.memory) > allocatable.memory;
    if cpu || memory {
        return Some(Failure::Insufficient { cpu, memory });
    }
    if taken.pods.saturating_add(1) > allocatable.pods {
        return Some(Failure::TooManyPods);
    }
    if let Some(port) = first_port_conflict(&footprint.ports, ports) {
        return Some(Failure::PortConflict { port: port.port, protocol: port.protocol });
    }
    None
}

/// Whether `pod` fits on `node` next to `bound`, the pods bound to it (finished ones are
/// skipped): the filter's room check, for the bind. The error says why, in the words of
/// the scheduler's explanation.
pub fn check_room<'a>(node: &Node, bound: impl IntoIterator<Item = &'a Pod>, pod: &Pod) -> Result<(), String> {
    let mut taken = Slot::default();
    for other in bound.into_iter().filter(|p| !p.status.phase.is_terminal()) {
        taken.add(&Footprint::of(other), None, false);
    }
    let footprint = Footprint::of(pod);
    let allocatable = node.status.allocatable;
    match room(&allocatable, &taken.usage, &taken.ports, &footprint) {
        None => Ok(()),
        Some(failure) => Err(room_detail(failure, &footprint, &taken.usage, &allocatable)),
    }
}
