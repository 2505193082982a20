//! The API side of the agent tests: the real server in process (in-memory store, on
//! 127.0.0.1:0), the calls the tests make of it, every stored version of each pod (recorded
//! from a watch opened before the first pod), and the agent's real client in a thin wrapper
//! that can lose a DELETED event, the one fault a test needs that no real server produces.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent::client::{ApiClient, Result as ClientResult, WatchStream};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::json;
use shared::api::{Heartbeat, List, WatchEventType};
use shared::model::{Event, Kind, Labels, Lease, Node, Object, ObjectMeta, Pod, PodSpec, Service};
use shared::registration::HOSTNAME_LABEL;
use shepherd_client::{Client, DeleteOptions, Selection};
use shepherd_testing::{TestServer, eventually, poll};

/// What the test and the agents' clients share: which pods' deletions the agents' watches
/// lose, and how often the agents listed their pods and renewed their leases.
#[derive(Default)]
struct Seen {
    lost: Mutex<HashSet<String>>,
    lists: AtomicU64,
    renewals: AtomicU64,
}

/// The real server, as the tests of one node use it.
pub struct Api {
    pub server: TestServer,
    /// The server's cluster id, which the agent labels its containers with.
    pub cluster: String,
    seen: Arc<Seen>,
    /// The name of each pod the test made, by uid.
    names: Mutex<HashMap<String, String>>,
    /// Every version of every pod the server stored, oldest first.
    history: Arc<Mutex<Vec<Pod>>>,
}

impl Api {
    pub async fn start() -> Arc<Api> {
        Api::start_with(server::Config::in_memory()).await
    }

    /// [`Api::start`] with a server of this configuration.
    pub async fn start_with(config: server::Config) -> Arc<Api> {
        let server = TestServer::start(config).await;
        let cluster = server.client.info().await.expect("the server's info").cluster_id;
        let history = Arc::new(Mutex::new(Vec::new()));
        let everything = Selection::default();
        let from = server.client.list::<Pod>(&everything).await.expect("the pods").resource_version;
        let mut watch = server.client.watch(Kind::Pod, &everything, from).await.expect("a watch of the pods");
        let recorded = history.clone();
        tokio::spawn(async move {
            while let Some(Ok(event)) = watch.next().await {
                if let Some(Object::Pod(pod)) = event.object {
                    recorded.lock().unwrap().push(pod);
                }
            }
        });
        Arc::new(Api { server, cluster, seen: Arc::default(), names: Mutex::default(), history })
    }

    pub fn client(&self) -> &Client {
        &self.server.client
    }

    /// The client an agent gets: the real one, losing the DELETED events of forgotten pods.
    pub fn agent_client(&self) -> Arc<dyn ApiClient> {
        Arc::new(AgentClient { client: self.client().clone(), seen: self.seen.clone() })
    }

    fn name(&self, uid: &str) -> String {
        self.names.lock().unwrap().get(uid).cloned().unwrap_or_else(|| panic!("the test made no pod with uid {uid}"))
    }

    /// Creates a pod in `default` that only `node` can take, and binds it there as the
    /// scheduler would (which may bind it first), once `node` has registered.
    pub async fn add_pod(&self, node: &str, name: &str, spec: PodSpec) -> Pod {
        self.add_labelled_pod(node, name, Labels::new(), spec).await
    }

    /// [`Api::add_pod`] with `labels`, for a Service to select.
    pub async fn add_labelled_pod(&self, node: &str, name: &str, labels: Labels, mut spec: PodSpec) -> Pod {
        spec.node_selector.insert(HOSTNAME_LABEL.into(), node.into());
        let metadata = ObjectMeta { labels, ..ObjectMeta::named("default", name) };
        let pod = Pod { kind: "Pod".into(), metadata, spec, status: Default::default() };
        let pod = self.client().create(&pod).await.unwrap_or_else(|e| panic!("cannot create pod {name}: {e}"));
        self.names.lock().unwrap().insert(pod.metadata.uid.clone(), name.to_string());
        eventually(self.client(), Duration::from_secs(30), &format!("node {node} to register"), || async {
            self.node(node).await.map(drop)
        })
        .await;
        let binding = json!({"kind": "Binding", "target": {"kind": "Node", "name": node}});
        let (status, answer) = self.server.post(&format!("/api/v1/namespaces/default/pods/{name}/binding"), binding).await;
        let bound = self.pod(&pod.metadata.uid).await;
        assert!(status.is_success() || bound.spec.node_name == node, "cannot bind pod {name} to {node}: {status} {answer}");
        bound
    }

    async fn delete(&self, uid: &str, grace: i64) {
        let options = DeleteOptions { grace_period_seconds: Some(grace), uid: Some(uid.to_string()) };
        let name = self.name(uid);
        self.client().delete(Kind::Pod, "default", &name, &options).await.unwrap_or_else(|e| panic!("cannot delete pod {name}: {e}"));
    }

    /// Removes the pod at once, as a deletion with grace period 0 does.
    pub async fn delete_pod(&self, uid: &str) {
        self.delete(uid, 0).await;
    }

    /// Deletes the pod with `grace` seconds: it is Terminating until its agent confirms.
    pub async fn terminate_pod(&self, uid: &str, grace: i64) {
        self.delete(uid, grace).await;
    }

    /// Removes the pod at once, with its DELETED event lost on the way to every agent.
    pub async fn forget_pod(&self, uid: &str) {
        self.seen.lost.lock().unwrap().insert(uid.to_string());
        self.delete(uid, 0).await;
    }

    /// The pod with this uid, if the server still has it.
    pub async fn find_pod(&self, uid: &str) -> Option<Pod> {
        self.client().get::<Pod>("default", &self.name(uid)).await.ok().filter(|p| p.metadata.uid == uid)
    }

    pub async fn has_pod(&self, uid: &str) -> bool {
        self.find_pod(uid).await.is_some()
    }

    pub async fn pod(&self, uid: &str) -> Pod {
        self.find_pod(uid).await.unwrap_or_else(|| panic!("the server has no pod {}", self.name(uid)))
    }

    /// The events about the pod called `pod`.
    pub async fn events_for(&self, pod: &str) -> Vec<Event> {
        let events = self.client().list::<Event>(&Selection::default()).await.expect("the events").items;
        events.into_iter().filter(|e| e.involved_object.name == pod).collect()
    }

    pub async fn node(&self, name: &str) -> Option<Node> {
        self.client().get::<Node>("", name).await.ok()
    }

    /// How many lease renewals of the agents the server answered.
    pub fn renewals(&self) -> u64 {
        self.seen.renewals.load(Ordering::SeqCst)
    }

    /// Waits until the agents have listed their pods `more` times from now: each full list
    /// is a resync, whose pods the agent has handed to their workers before it lists again.
    pub async fn wait_lists(&self, more: u64) {
        let until = self.seen.lists.load(Ordering::SeqCst) + more;
        poll(Duration::from_secs(30), &format!("{more} more lists of the agent's pods"), || async {
            let lists = self.seen.lists.load(Ordering::SeqCst);
            (lists >= until).then_some(()).ok_or(format!("{lists} lists"))
        })
        .await
    }

    /// Waits until some stored version of the pod, at or after position `from` in its
    /// history, satisfies `check` (so a state that lasted a moment is not missed). Returns
    /// that version's position and the pod.
    pub async fn wait_for_version(
        &self,
        uid: &str,
        from: usize,
        what: &str,
        timeout: Duration,
        check: impl Fn(&Pod) -> bool,
    ) -> (usize, Pod) {
        poll(timeout, &format!("pod {} to reach {what}", self.name(uid)), || async {
            let history: Vec<Pod> = self.history.lock().unwrap().iter().filter(|p| p.metadata.uid == uid).cloned().collect();
            let found = history.iter().enumerate().skip(from).find(|(_, p)| check(p)).map(|(i, p)| (i, p.clone()));
            found.ok_or_else(|| format!("{:#?}", history.last().map(|p| &p.status)))
        })
        .await
    }

    /// Waits until the pod satisfies `check`, looking again at each change the watch reports.
    pub async fn wait_for(&self, uid: &str, what: &str, timeout: Duration, check: impl Fn(&Pod) -> bool) -> Pod {
        eventually(self.client(), timeout, &format!("pod {} to reach {what}", self.name(uid)), || async {
            let pod = self.pod(uid).await;
            if check(&pod) { Ok(pod) } else { Err(format!("{:#?}", pod.status)) }
        })
        .await
    }
}

/// The agent's real client, counting lists and renewals, and dropping the DELETED events of
/// forgotten pods from its watches.
struct AgentClient {
    client: Client,
    seen: Arc<Seen>,
}

#[async_trait]
impl ApiClient for AgentClient {
    async fn cluster_id(&self) -> ClientResult<String> {
        ApiClient::cluster_id(&self.client).await
    }

    async fn register_node(&self, node: &Node) -> ClientResult<Node> {
        ApiClient::register_node(&self.client, node).await
    }

    async fn renew_lease(&self, node: &str) -> ClientResult<Lease> {
        let lease = ApiClient::renew_lease(&self.client, node).await?;
        self.seen.renewals.fetch_add(1, Ordering::SeqCst);
        Ok(lease)
    }

    async fn heartbeat(&self, node: &str, heartbeat: &Heartbeat) -> ClientResult<()> {
        ApiClient::heartbeat(&self.client, node, heartbeat).await
    }

    async fn list_pods(&self, node: &str) -> ClientResult<List<Pod>> {
        let pods = ApiClient::list_pods(&self.client, node).await?;
        self.seen.lists.fetch_add(1, Ordering::SeqCst);
        Ok(pods)
    }

    async fn watch_pods(&self, node: &str, resource_version: u64) -> ClientResult<WatchStream> {
        let seen = self.seen.clone();
        let lost = move |event: &shared::api::WatchEvent| {
            let lost = seen.lost.lock().unwrap();
            event.type_ == WatchEventType::Deleted && matches!(&event.object, Some(Object::Pod(p)) if lost.contains(&p.metadata.uid))
        };
        let stream = ApiClient::watch_pods(&self.client, node, resource_version).await?;
        Ok(stream.filter(move |item| futures::future::ready(!item.as_ref().is_ok_and(&lost))).boxed())
    }

    async fn update_pod_status(&self, pod: &Pod) -> ClientResult<Pod> {
        ApiClient::update_pod_status(&self.client, pod).await
    }

    async fn delete_pod_now(&self, pod: &Pod) -> ClientResult<()> {
        ApiClient::delete_pod_now(&self.client, pod).await
    }

    async fn create_event(&self, event: &Event) -> ClientResult<()> {
        ApiClient::create_event(&self.client, event).await
    }

    async fn list_services(&self) -> ClientResult<List<Service>> {
        ApiClient::list_services(&self.client).await
    }

    async fn watch_services(&self, resource_version: u64) -> ClientResult<WatchStream> {
        ApiClient::watch_services(&self.client, resource_version).await
    }

    async fn config_map(&self, namespace: &str, name: &str) -> ClientResult<Option<shared::model::ConfigMap>> {
        ApiClient::config_map(&self.client, namespace, name).await
    }

    async fn secret(&self, namespace: &str, name: &str) -> ClientResult<Option<shared::model::Secret>> {
        ApiClient::secret(&self.client, namespace, name).await
    }
}
