//! The container runtimes: the seam the pod workers drive ([`seam`], re-exported here) and
//! its two implementations, Docker through bollard ([`docker`], with `cgroup` for the usage
//! Docker's stats leave empty) and the simulator ([`simulated`]), Docker's exec and attach sessions (`docker_session`), and what works
//! inside a pod: its probes ([`loopback_probe`]), port-forward and its hostname ([`namespaces`]).

mod cgroup;
pub mod docker;
mod docker_session;
pub mod loopback_probe;
pub mod namespaces;
mod seam;
pub mod simulated;

pub use docker::DockerRuntime;
pub use seam::*;
pub use simulated::SimulatedRuntime;
