//! The lease loop on tokio's paused clock: a renewal every interval, and the node's status
//! only when it changed, after the report interval, or with the first renewal after a gap
//! (when node lifecycle may have marked the node Unknown).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use agent::client::{ApiClient, Error, Result, WatchStream};
use agent::node::{Heartbeats, lease_loop};
use async_trait::async_trait;
use shared::api::{Heartbeat, List};
use shared::model::{Event, Lease, LeaseSpec, Node, ObjectMeta, Pod, Service};
use tokio_util::sync::CancellationToken;

/// The two calls of the lease loop, counted, and a switch that makes the server unreachable.
/// Not the real server: its sockets would not wait for the paused clock, which jumps ahead
/// whenever the runtime is idle, so the counts at each instant would depend on the machine.
#[derive(Default)]
struct LeaseCalls {
    renewals: AtomicU64,
    heartbeats: AtomicU64,
    down: AtomicBool,
}

impl LeaseCalls {
    fn counts(&self) -> (u64, u64) {
        (self.renewals.load(Ordering::SeqCst), self.heartbeats.load(Ordering::SeqCst))
    }

    fn answer(&self, action: &str, count: &AtomicU64) -> Result<()> {
        if self.down.load(Ordering::SeqCst) {
            return Err(Error::Unreachable { server: "test".into(), action: action.into(), cause: "down".into() });
        }
        count.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[async_trait]
impl ApiClient for LeaseCalls {
    /// The lease as the server answers a renewal: held by `node` for 40 s from now.
    async fn renew_lease(&self, node: &str) -> Result<Lease> {
        self.answer("renew", &self.renewals)?;
        let spec = LeaseSpec {
            holder_identity: node.into(),
            lease_duration_seconds: 40,
            renew_time: Some(chrono::Utc::now()),
            ..LeaseSpec::default()
        };
        Ok(Lease { kind: "Lease".into(), metadata: ObjectMeta::named("", node), spec })
    }

    async fn heartbeat(&self, _node: &str, _heartbeat: &Heartbeat) -> Result<()> {
        self.answer("heartbeat", &self.heartbeats)
    }

    async fn cluster_id(&self) -> Result<String> {
        unreachable!("the lease loop only renews and reports")
    }

    async fn register_node(&self, _: &Node) -> Result<Node> {
        unreachable!("the lease loop only renews and reports")
    }

    async fn list_pods(&self, _: &str) -> Result<List<Pod>> {
        unreachable!("the lease loop only renews and reports")
    }

    async fn watch_pods(&self, _: &str, _: u64) -> Result<WatchStream> {
        unreachable!("the lease loop only renews and reports")
    }

    async fn update_pod_status(&self, _: &Pod) -> Result<Pod> {
        unreachable!("the lease loop only renews and reports")
    }

    async fn delete_pod_now(&self, _: &Pod) -> Result<()> {
        unreachable!("the lease loop only renews and reports")
    }

    async fn create_event(&self, _: &Event) -> Result<()> {
        unreachable!("the lease loop only renews and reports")
    }

    async fn list_services(&self) -> Result<List<Service>> {
        unreachable!("the lease loop only renews and reports")
    }

    async fn watch_services(&self, _: u64) -> Result<WatchStream> {
        unreachable!("the lease loop only renews and reports")
    }
}

#[tokio::test(start_paused = true)]
async fn the_status_is_sent_only_when_it_changed_after_the_report_interval_or_after_a_gap() {
    let api = Arc::new(LeaseCalls::default());
    let cpu = Arc::new(AtomicI64::new(4000));
    let shutdown = CancellationToken::new();
    let heartbeats = Heartbeats { lease_renew_interval: Duration::from_secs(10), node_status_report_interval: Duration::from_secs(300) };
    let running = {
        let (api, cpu, shutdown) = (api.clone(), cpu.clone(), shutdown.clone());
        tokio::spawn(async move {
            let node = shepherd_testing::node("n1");
            let status = |now| {
                let mut current = node.clone();
                current.capacity.cpu = cpu.load(Ordering::SeqCst);
                current.heartbeat(now)
            };
            lease_loop(api.as_ref(), &node, &status, heartbeats, &shutdown).await;
        })
    };
    let start = tokio::time::Instant::now();
    let until = |seconds: u64| tokio::time::sleep_until(start + Duration::from_secs(seconds));

    until(95).await;
    assert_eq!(api.counts(), (9, 0), "renewals only: registration reported the status");

    cpu.store(2000, Ordering::SeqCst);
    until(105).await;
    assert_eq!(api.counts(), (10, 1), "the changed status goes with the next renewal");

    until(395).await;
    assert_eq!(api.counts().1, 1, "unchanged: nothing more until the report interval has passed");
    until(405).await;
    assert_eq!(api.counts(), (40, 2), "five minutes after the last report");

    // The server is away for four renewals; the first renewal after the gap reports the status.
    api.down.store(true, Ordering::SeqCst);
    until(445).await;
    api.down.store(false, Ordering::SeqCst);
    until(455).await;
    assert_eq!(api.counts(), (41, 3), "a renewal 50s after the one before, more than half the lease's 40s");
    until(495).await;
    assert_eq!(api.counts(), (45, 3));

    shutdown.cancel();
    running.await.unwrap();
}
