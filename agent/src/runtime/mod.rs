//! The container runtimes: the seam the pod workers drive ([`seam`], re-exported here) and
//! its two implementations, Docker through bollard ([`docker`]) and the simulator
//! ([`simulated`]), and the probes that connect from inside a pod ([`loopback_probe`]).

pub mod docker;
pub mod loopback_probe;
mod seam;
pub mod simulated;

pub use docker::DockerRuntime;
pub use seam::*;
pub use simulated::SimulatedRuntime;
