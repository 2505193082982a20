//! One pod on its node: the worker's level-triggered reconcile ([`worker`]), what it asks the
//! runtime to create ([`config`]), the status it reports ([`status`]) and how a deleted or
//! terminating pod's containers stop ([`termination`]), around what every worker of a node
//! shares ([`context`]).

pub mod config;
pub mod context;
pub mod status;
pub mod termination;
pub mod worker;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("pod {pod}: {source}")]
    Runtime { pod: String, source: crate::runtime::Error },
    #[error("pod {pod}: {source}")]
    Api { pod: String, source: crate::client::Error },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
pub(crate) mod fixtures {
    //! A node context on the simulated runtime with an API that accepts everything, and a pod.

    use std::sync::Arc;
    use std::time::Duration;

    use shared::model::{Container, ContainerPort, EnvVar, Event, ObjectMeta, Pod, PodSpec, ResourceRequirements};

    use super::context::NodeContext;
    use crate::client::ApiClient;
    use crate::runtime::SimulatedRuntime;

    pub struct NoApi;

    #[async_trait::async_trait]
    impl ApiClient for NoApi {
        async fn cluster_id(&self) -> crate::client::Result<String> {
            Ok("c1".into())
        }
        async fn register_node(&self, node: &shared::model::Node) -> crate::client::Result<shared::model::Node> {
            Ok(node.clone())
        }
        async fn renew_lease(&self, _: &str) -> crate::client::Result<shared::model::Lease> {
            Ok(shared::model::Lease::default())
        }
        async fn heartbeat(&self, _: &str, _: &shared::api::Heartbeat) -> crate::client::Result<()> {
            Ok(())
        }
        async fn list_pods(&self, _: &str) -> crate::client::Result<shared::api::List<Pod>> {
            Ok(shared::api::List { kind: "PodList".into(), resource_version: 0, items: vec![] })
        }
        async fn watch_pods(&self, _: &str, _: u64) -> crate::client::Result<crate::client::WatchStream> {
            Ok(Box::pin(futures::stream::empty()))
        }
        async fn update_pod_status(&self, pod: &Pod) -> crate::client::Result<Pod> {
            Ok(pod.clone())
        }
        async fn delete_pod_now(&self, _: &Pod) -> crate::client::Result<()> {
            Ok(())
        }
        async fn create_event(&self, _: &Event) -> crate::client::Result<()> {
            Ok(())
        }
    }

    pub fn ctx() -> NodeContext {
        NodeContext {
            node_name: "n1".into(),
            cluster: "c1".into(),
            address: "127.0.0.1".into(),
            network: "shepherd".into(),
            runtime: Arc::new(SimulatedRuntime::new(Duration::ZERO)),
            api: Arc::new(NoApi),
            events: Arc::new(NoApi),
            backoff: crate::DEFAULT_BACKOFF,
            sandboxes: None,
        }
    }

    pub fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta { name: "web_1".into(), namespace: "default".into(), uid: "1234-abcd-5678".into(), ..Default::default() },
            spec: PodSpec {
                containers: vec![Container {
                    name: "web".into(),
                    image: "minimal".into(),
                    command: vec!["sh".into()],
                    args: vec!["-c".into(), "sleep 1".into()],
                    env: vec![EnvVar { name: "A".into(), value: "1".into() }],
                    ports: vec![ContainerPort { container_port: 80, host_port: Some(8080), ..Default::default() }],
                    resources: ResourceRequirements { memory: 64 << 20, cpu: 250 },
                    ..Default::default()
                }],
                termination_grace_period_seconds: Some(3),
                ..Default::default()
            },
            ..Default::default()
        }
    }
}
