//! The container runtimes: the seam the pod workers drive ([`seam`], re-exported here) and
//! its two implementations, Docker through bollard ([`docker`]) and the simulator
//! ([`simulated`]), Docker's exec and attach sessions (`docker_session`), and the probes that connect from inside a pod ([`loopback_probe`]).

pub mod docker;
mod docker_session;
pub mod loopback_probe;
mod seam;
pub mod simulated;

pub use docker::DockerRuntime;
pub use seam::*;
pub use simulated::SimulatedRuntime;
