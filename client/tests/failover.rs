//! A client given several servers: calls skip a server that cannot be reached, and a watch
//! whose server stops resumes on another server of the same etcd from its last revision,
//! missing nothing and repeating nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use server::Config;
use server::store::EtcdSettings;
use shared::api::WatchEventType;
use shared::backoff::Backoff;
use shared::model::{Kind, Pod};
use shepherd_client::watcher::{Collection, Event, Watcher};
use shepherd_client::{Client, Selection};
use shepherd_testing::{Etcd, TestServer};

/// A loopback address nothing listens on: connections to it are refused.
fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "minimal"}]}
    }))
    .unwrap()
}

#[tokio::test]
async fn calls_skip_a_server_that_cannot_be_reached() {
    let live = TestServer::start(Config { run_scheduler: false, ..Config::in_memory() }).await;
    let dead = dead_url();
    let client = Client::new(&format!("{dead},{}", live.url), None).unwrap().named("tests");
    assert_eq!(client.base(), dead, "the first server is tried first");

    let created = client.create(&pod("web")).await.expect("a create whose connection was refused goes to the next server");
    assert_eq!(client.base(), live.url, "calls go to the server that answered from now on");
    let read: Pod = client.get("default", "web").await.unwrap();
    assert_eq!(read.metadata.uid, created.metadata.uid);
    let list = client.list::<Pod>(&Selection::namespace(Some("default"))).await.unwrap();
    assert_eq!(list.items.len(), 1);

    // A fresh client starts at the dead server again, for a read.
    let fresh = Client::new(&format!("{dead},{}", live.url), None).unwrap().named("tests");
    let read: Pod = fresh.get("default", "web").await.expect("a read goes to the next server");
    assert_eq!(read.metadata.uid, created.metadata.uid);
    // An answer is the cluster's: a 404 does not move on, and names the object.
    let missing = fresh.get::<Pod>("default", "ghost").await.unwrap_err();
    assert!(missing.is_not_found(), "{missing}");

    let nowhere = Client::new(&format!("{dead},{}", dead_url()), None).unwrap();
    let error = nowhere.list::<Pod>(&Selection::default()).await.unwrap_err();
    assert!(error.is_unreachable(), "{error}");
    assert!(error.to_string().contains(&format!("{dead}, ")), "every server tried is named: {error}");
    live.stop().await;
}

fn on_etcd(etcd: &Etcd) -> Config {
    let etcd = EtcdSettings { endpoints: etcd.endpoints(), prefix: "/failover".into(), compaction_interval: Duration::ZERO };
    Config { etcd: Some(etcd), run_scheduler: false, bookmark_interval: Duration::from_millis(100), ..Config::in_memory() }
}

/// Reads the watcher until every pod in `names` has been seen, recording each change.
async fn watch_until(watcher: &mut Watcher<Collection>, seen: &mut Vec<(String, u64)>, names: &[&str]) {
    let all_seen = |seen: &Vec<(String, u64)>| names.iter().all(|n| seen.iter().any(|(s, _)| s == n));
    tokio::time::timeout(Duration::from_secs(20), async {
        while !all_seen(seen) {
            match watcher.next().await.expect("the watcher carries on") {
                Event::Changed(event) => {
                    let object = event.object.expect("a change carries its object");
                    assert_eq!(event.type_, WatchEventType::Added, "{object:?}");
                    seen.push((object.metadata().name.clone(), event.resource_version));
                }
                Event::Listed { objects, .. } => panic!("the watcher listed again ({} objects): it lost its place", objects.len()),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the watch never brought all of {names:?}; it brought {seen:?}"));
}

#[tokio::test]
async fn a_watch_resumes_on_the_next_server_at_its_last_revision() {
    let etcd = Etcd::start(1).await;
    let first = TestServer::start(on_etcd(&etcd)).await;
    let second = TestServer::start(on_etcd(&etcd)).await;
    let writer = shepherd_testing::client(&second.url, None);
    let client = Client::new(&format!("{},{}", first.url, second.url), None).unwrap().named("tests");
    let source = Collection { client: client.clone(), kind: Kind::Pod, selection: Selection::namespace(Some("default")) };
    let mut watcher = Watcher::new(source, Backoff::new(Duration::from_millis(10), Duration::from_millis(50)));
    let Event::Listed { objects, .. } = watcher.next().await.unwrap() else { panic!("a watcher lists first") };
    assert!(objects.is_empty());

    let mut seen = Vec::new();
    writer.create(&pod("before")).await.unwrap();
    watch_until(&mut watcher, &mut seen, &["before"]).await;
    assert_eq!(client.base(), first.url);

    first.stop().await;
    for name in ["down-1", "down-2", "down-3"] {
        writer.create(&pod(name)).await.unwrap();
    }
    watch_until(&mut watcher, &mut seen, &["down-1", "down-2", "down-3"]).await;
    assert_eq!(client.base(), second.url, "the watch moved to the second server");
    writer.create(&pod("after")).await.unwrap();
    watch_until(&mut watcher, &mut seen, &["after"]).await;

    let mut times: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, _) in &seen {
        *times.entry(name.as_str()).or_default() += 1;
    }
    assert!(times.values().all(|n| *n == 1), "each pod seen once: {seen:?}");
    assert_eq!(times.len(), 5, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].1 < w[1].1), "revisions strictly increase: {seen:?}");
    second.stop().await;
}
