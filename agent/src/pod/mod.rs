//! One pod on its node: the worker's level-triggered reconcile ([`worker`]), what it asks the
//! runtime to create ([`config`]) with its own variables ([`env`]) and those of its
//! namespace's Services ([`service_env`]), its hostname and hosts file ([`hosts`]), its containers' probes ([`prober`]), the status it
//! reports ([`status`]), how a deleted or terminating pod's containers stop
//! ([`termination`]) and its volumes on the node ([`volumes`]; ConfigMaps' and Secrets' files
//! in [`config_volumes`], written by [`atomic_writer`]; `subPath` binds in [`sub_path`]), around what every worker of
//! a node shares ([`context`]).

pub mod atomic_writer;
pub mod config;
pub mod config_volumes;
pub mod context;
pub mod env;
pub mod hosts;
pub mod prober;
pub mod service_env;
pub mod status;
pub mod sub_path;
pub mod termination;
pub mod volumes;
pub mod worker;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("pod {pod}: {source}")]
    Runtime { pod: String, source: crate::runtime::Error },
    #[error("pod {pod}: {source}")]
    Api { pod: String, source: crate::client::Error },
    #[error("pod {pod}: {source}")]
    Volumes { pod: String, source: volumes::Error },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
