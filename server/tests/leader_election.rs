//! Two API servers on one store: only the elected leader schedules; when it stops, it
//! releases the lease and the other leads and schedules; `/api/v1/info` says who leads and
//! which servers answer, at which URLs.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{TestServer, add_node, eventually, pod};
use reqwest::StatusCode;
use server::Config;
use server::config::LeaderElection;
use server::store::{CachedStore, EtcdSettings, Store};
use shared::api::{ApiServer, Info};
use shepherd_testing::Etcd;

const WAIT: Duration = Duration::from_secs(20);

fn config(id: &str) -> Config {
    Config {
        server_id: Some(id.into()),
        scheduler_sweep: Duration::from_millis(500),
        leader_election: LeaderElection {
            leader_elect: true,
            lease_duration: Duration::from_secs(3),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(500),
        },
        ..Config::in_memory()
    }
}

async fn info(server: &TestServer) -> Info {
    server.client.info().await.expect("the server answers /api/v1/info")
}

/// Waits until pod `name` is bound.
async fn bound(server: &TestServer, name: &str) {
    let path = format!("/api/v1/namespaces/default/pods/{name}");
    eventually(&server.client, WAIT, &format!("pod {name} bound"), || async {
        let (_, pod) = server.get(&path).await;
        pod["spec"]["node_name"].as_str().filter(|n| !n.is_empty()).map(str::to_string)
    })
    .await;
}

/// Whether `server`'s scheduler decided about pod `name`: the one that bound it keeps the decision.
async fn decided_by(server: &TestServer, name: &str) -> bool {
    let (status, _) = server.get(&format!("/api/v1/namespaces/default/pods/{name}/scheduling")).await;
    status == StatusCode::OK
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_two_servers_on_a_store_schedules_and_the_other_takes_over_when_it_stops() {
    let store: Arc<dyn Store> = Arc::new(CachedStore::in_memory(10_000));
    let a = TestServer::start_on(store.clone(), config("server-a")).await;
    let b = TestServer::start_on(store, config("server-b")).await;
    hand_over(a, b).await;
}

/// The case leader election is for: two servers, each with its own connection to one etcd.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_etcd_elect_one_scheduler_and_hand_over() {
    let etcd = Etcd::start(1).await;
    let on_etcd = |id: &str| Config {
        etcd: Some(EtcdSettings { endpoints: etcd.endpoints(), prefix: "/leader".into(), compaction_interval: Duration::ZERO }),
        ..config(id)
    };
    let a = TestServer::start(on_etcd("server-a")).await;
    let b = TestServer::start(on_etcd("server-b")).await;
    hand_over(a, b).await;
}

/// `a` and `b` share a store, `a` started first: one leads and binds a pod created through
/// the other; stopped, it hands over, and the other binds the next.
async fn hand_over(a: TestServer, b: TestServer) {
    let seen = eventually(&a.client, WAIT, "a leader", || async {
        let info = info(&a).await;
        (!info.leader.is_empty() && info.servers.len() == 2).then_some(info)
    })
    .await;
    let servers =
        vec![ApiServer { identity: "server-a".into(), url: a.url.clone() }, ApiServer { identity: "server-b".into(), url: b.url.clone() }];
    assert_eq!(seen.servers, servers);
    assert_eq!(seen.server_identity, "server-a");
    let (leader, follower, follower_id) = match seen.leader.as_str() {
        "server-a" => (a, b, "server-b"),
        "server-b" => (b, a, "server-a"),
        other => panic!("an unknown leader {other:?}"),
    };
    eventually(&follower.client, WAIT, "the follower to read the same lease", || async {
        (info(&follower).await.leader == seen.leader).then_some(())
    })
    .await;

    add_node(&follower, "node-1", 4000, 8 << 30, 110).await;
    follower.post("/api/v1/namespaces/default/pods", pod("web-1", 100, 1 << 20)).await;
    bound(&follower, "web-1").await;
    assert!(decided_by(&leader, "web-1").await, "the leader's scheduler bound it");
    assert!(!decided_by(&follower, "web-1").await, "the follower's scheduler does not run");

    leader.stop().await;
    eventually(&follower.client, WAIT, "the other server to lead, alone", || async {
        let info = info(&follower).await;
        let alone = info.servers.iter().map(|s| s.identity.as_str()).eq([follower_id]);
        (info.leader == follower_id && alone).then_some(())
    })
    .await;
    follower.post("/api/v1/namespaces/default/pods", pod("web-2", 100, 1 << 20)).await;
    bound(&follower, "web-2").await;
    assert!(decided_by(&follower, "web-2").await, "the new leader's scheduler bound it");
    follower.stop().await;
}
