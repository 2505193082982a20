//! The etcd store against real etcd members (Debian's etcd-server): several servers on one
//! etcd see each other's writes, writes race through compare-and-swap, a prefix that is not
//! Shepherd's is refused, a list paged through one server goes on through another at its
//! revision, and losing etcd, or one member of three, loses no acknowledged write.
//! The rest of the server's suite runs on etcd too, when `SHEPHERD_TEST_ETCD` names a member
//! (scripts/test.sh does).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{TestServer, open_watch, pod};
use futures::StreamExt;
use reqwest::StatusCode;
use server::Config;
use server::store::{Encryption, EtcdSettings, EtcdStore, Key, Store, StoreError, Txn};
use shared::api::WatchEventType;
use shared::model::{Kind, Namespace, Object, ObjectMeta, Pod};
use shepherd_testing::Etcd;

fn settings(etcd: &Etcd, prefix: &str) -> EtcdSettings {
    EtcdSettings { endpoints: etcd.endpoints(), prefix: prefix.into(), compaction_interval: Duration::ZERO }
}

fn on_etcd(etcd: &Etcd, prefix: &str) -> Config {
    Config { etcd: Some(settings(etcd, prefix)), run_scheduler: false, ..Config::in_memory() }
}

#[tokio::test]
async fn a_pod_created_through_one_server_reaches_a_watch_on_the_other() {
    let etcd = Etcd::start(1).await;
    let first = TestServer::start(on_etcd(&etcd, "/two")).await;
    let second = TestServer::start(on_etcd(&etcd, "/two")).await;
    let (_, list) = second.get("/api/v1/pods").await;
    let from = list["resource_version"].as_u64().unwrap();
    let mut watch = open_watch(&second, &format!("/api/v1/pods?watch=true&resource_version={from}")).await;

    let sent = Instant::now();
    let (status, created) = first.post("/api/v1/pods", pod("web", 10, 10)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let event = loop {
        let event = watch.next(Duration::from_secs(5)).await.expect("the other server's watch brings the pod").watch_event();
        if event.type_ != WatchEventType::Bookmark {
            break event;
        }
    };
    eprintln!("create through one server to the event on the other: {:?}", sent.elapsed());
    assert_eq!(event.type_, WatchEventType::Added);
    assert_eq!(event.resource_version, created["metadata"]["resource_version"].as_u64().unwrap(), "the same revision on both");
    let (status, read) = second.get("/api/v1/namespaces/default/pods/web").await;
    assert_eq!((status, &read["metadata"]["uid"]), (StatusCode::OK, &created["metadata"]["uid"]));

    // A stale resource_version through the other server loses the compare-and-swap.
    let mut stale = created.clone();
    stale["metadata"]["labels"] = serde_json::json!({"from": "second"});
    assert_eq!(second.put("/api/v1/namespaces/default/pods/web", stale.clone()).await.0, StatusCode::OK);
    let (status, error) = first.put("/api/v1/namespaces/default/pods/web", stale).await;
    assert_eq!(status, StatusCode::CONFLICT, "{error}");
    first.stop().await;
    second.stop().await;
}

fn pod_object(name: &str) -> Object {
    Object::Pod(Pod { kind: "Pod".into(), metadata: ObjectMeta::named("default", name), ..Pod::default() })
}

async fn store_on(etcd: &Etcd, prefix: &str) -> Arc<EtcdStore> {
    Arc::new(EtcdStore::connect(&settings(etcd, prefix), Encryption::default(), 1000).await.expect("the etcd store opens"))
}

/// Two stores write one object at once, each from a cache the other's writes leave behind:
/// every write lands, each on the state the one before it left (GuaranteedUpdate's retry).
#[tokio::test]
async fn writes_of_two_servers_to_one_object_all_land() {
    let etcd = Etcd::start(1).await;
    let (a, b) = (store_on(&etcd, "/race").await, store_on(&etcd, "/race").await);
    let namespace = Namespace { kind: "Namespace".into(), metadata: ObjectMeta::named("", "default"), ..Namespace::default() };
    a.commit(Txn::new().with(server::ops::create(namespace))).await.unwrap();
    a.commit(
        Txn::new()
            .with(server::store::Write::new(Key::of(&pod_object("counter")), |_, _| Ok(server::store::Change::Put(pod_object("counter"))))),
    )
    .await
    .unwrap();
    let key = Key::new(Kind::Pod, "default", "counter");
    let mut writes = Vec::new();
    for i in 0..40 {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        let key = key.clone();
        writes.push(tokio::spawn(async move {
            let label = server::ops::modify::<Pod>(key, move |_, pod| {
                pod.metadata.labels.insert(format!("w{i}"), "x".into());
                Ok(())
            });
            store.commit(Txn::new().with(label)).await
        }));
    }
    for write in writes {
        write.await.unwrap().expect("every write lands");
    }
    for store in [&a, &b] {
        let pod = shepherd_testing::poll(Duration::from_secs(5), "both caches to hold every label", || {
            let labels = store.get(&key).map_or(0, |o| o.metadata().labels.len());
            async move { (labels == 40).then_some(()) }
        });
        pod.await;
    }
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn a_prefix_with_keys_shepherd_did_not_write_is_refused() {
    let etcd = Etcd::start(1).await;
    let mut client = etcd_client::Client::connect(etcd.endpoints(), None).await.unwrap();
    client.put("/registry/pods/default/web", b"k8s\x00\x0a\x09".to_vec(), None).await.unwrap();
    let refused = EtcdStore::connect(&settings(&etcd, "/registry"), Encryption::default(), 10).await.err().expect("refused");
    let text = refused.to_string();
    assert!(text.contains("/registry/pods/default/web") && text.contains("--etcd-prefix"), "{text}");
    // A prefix of its own beside it is fine, and marked as Shepherd's.
    let store = store_on(&etcd, "/shepherd").await;
    store.close().await;
    let marker = client.get("/shepherd/.shepherd", None).await.unwrap();
    assert_eq!(marker.kvs().len(), 1);
}

#[tokio::test]
async fn an_etcd_that_does_not_answer_at_start_is_named() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let settings = EtcdSettings { endpoints: vec![url.clone()], prefix: "/registry".into(), compaction_interval: Duration::ZERO };
    let error = EtcdStore::connect(&settings, Encryption::default(), 10).await.err().expect("no etcd there");
    assert!(matches!(error, StoreError::Unavailable(_)), "{error:?}");
    assert!(error.to_string().contains(&url), "{error}");
}

/// etcd gone: reads still come from the cache, writes answer 503 and nothing is kept that
/// etcd did not commit.
#[tokio::test]
async fn without_etcd_writes_answer_503_and_reads_are_served() {
    let mut etcd = Etcd::start(1).await;
    let server = TestServer::start(on_etcd(&etcd, "/lost")).await;
    assert_eq!(server.post("/api/v1/pods", pod("before", 1, 1)).await.0, StatusCode::CREATED);
    etcd.kill(0);
    let (status, error) = server.post("/api/v1/pods", pod("after", 1, 1)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{error}");
    assert!(error.to_string().contains("etcd"), "{error}");
    assert_eq!(server.get("/api/v1/namespaces/default/pods/before").await.0, StatusCode::OK);
    assert_eq!(server.get("/api/v1/namespaces/default/pods/after").await.0, StatusCode::NOT_FOUND);
    server.stop().await;
}

/// One member of three killed during a stream of creates: every create that was answered
/// 201 is there afterwards, and the API keeps taking creates.
#[tokio::test]
async fn losing_one_member_of_three_loses_no_acknowledged_write() {
    let mut etcd = Etcd::start(3).await;
    let server = TestServer::start(on_etcd(&etcd, "/three")).await;
    let mut acknowledged = Vec::new();
    let mut refused = 0;
    for i in 0..150 {
        if i == 50 {
            etcd.kill(0);
        }
        let name = format!("p{i}");
        match server.post("/api/v1/pods", pod(&name, 1, 1)).await.0 {
            StatusCode::CREATED => acknowledged.push(name),
            _ => refused += 1,
        }
    }
    assert!(acknowledged.iter().any(|n| n == "p149"), "creates are taken again after the loss; {refused} refused");
    let restarted = TestServer::start(on_etcd(&etcd, "/three")).await;
    for name in &acknowledged {
        let (status, _) = restarted.get(&format!("/api/v1/namespaces/default/pods/{name}")).await;
        assert_eq!(status, StatusCode::OK, "acknowledged create {name} is in etcd");
    }
    eprintln!("{} creates acknowledged, {refused} refused while a member was lost", acknowledged.len());
    server.stop().await;
    restarted.stop().await;
}

/// Two servers that start together on an empty prefix both make the `default` namespace;
/// the one that loses the race takes the other's.
#[tokio::test]
async fn two_servers_starting_at_once_on_an_empty_prefix_both_start() {
    let etcd = Etcd::start(1).await;
    let (a, b) = tokio::join!(TestServer::start(on_etcd(&etcd, "/together")), TestServer::start(on_etcd(&etcd, "/together")));
    let (_, namespace_a) = a.get("/api/v1/namespaces/default").await;
    let (_, namespace_b) = b.get("/api/v1/namespaces/default").await;
    assert_eq!(namespace_a["metadata"]["uid"], namespace_b["metadata"]["uid"], "one namespace, one cluster id");
    a.stop().await;
    b.stop().await;
}

/// A client failing over resumes its watch on another server from the revision the first
/// one gave it. That server's cache may not have the revision yet: it waits for it, as
/// kube-apiserver waits for a too-large resourceVersion, instead of answering 410 at once;
/// a revision etcd never reaches is still refused after the wait.
#[tokio::test]
async fn a_watch_from_a_revision_another_server_gave_waits_for_it() {
    let etcd = Etcd::start(1).await;
    let first = TestServer::start(on_etcd(&etcd, "/catch-up")).await;
    let limit = Duration::from_secs(1);
    let config = Config { watch_catch_up: limit, bookmark_interval: Duration::from_millis(50), ..on_etcd(&etcd, "/catch-up") };
    let second = TestServer::start(config).await;

    let (status, created) = first.post("/api/v1/pods", pod("web", 1, 1)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let revision = created["metadata"]["resource_version"].as_u64().unwrap();
    let mut watch = open_watch(&second, &format!("/api/v1/pods?watch=true&resource_version={revision}")).await;
    let bookmark = watch.next(Duration::from_secs(5)).await.expect("the watch streams").watch_event();
    assert_eq!(bookmark.type_, WatchEventType::Bookmark);
    assert!(bookmark.resource_version >= revision);

    // A revision no change of this prefix brings (another prefix's write): the server has it
    // only once it asks etcd for its watch's progress, so without the wait it is refused.
    let mut etcd_client = etcd_client::Client::connect(etcd.endpoints(), None).await.unwrap();
    let put = etcd_client.put("/elsewhere/key", "value", None).await.unwrap();
    let revision = u64::try_from(put.header().unwrap().revision()).unwrap();
    open_watch(&second, &format!("/api/v1/pods?watch=true&resource_version={revision}")).await;
    let response =
        second.bare(reqwest::Method::GET, &format!("/k8s/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion={revision}"));
    let response = response.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.bytes_stream();
    let line = tokio::time::timeout(Duration::from_secs(5), body.next()).await.expect("a line").unwrap().unwrap();
    let line = String::from_utf8_lossy(&line);
    assert!(line.contains("BOOKMARK") && !line.contains("ERROR"), "{line}");

    let far = revision + 1_000_000;
    let asked = Instant::now();
    let (status, error) = second.get(&format!("/api/v1/pods?watch=true&resource_version={far}")).await;
    assert_eq!(status, StatusCode::GONE, "{error}");
    assert!(error.to_string().contains("newer than the store"), "{error}");
    assert!(asked.elapsed() >= limit, "refused only after the wait: {:?}", asked.elapsed());
    first.stop().await;
    second.stop().await;
}

/// A list paged through one server goes on through another at the first page's revision:
/// the token holds etcd's revision, which every server's cache shares.
#[tokio::test]
async fn a_list_paged_through_one_server_goes_on_through_another_at_its_revision() {
    let etcd = Etcd::start(1).await;
    let first = TestServer::start(on_etcd(&etcd, "/pages")).await;
    let second = TestServer::start(on_etcd(&etcd, "/pages")).await;
    for name in ["a", "b", "c", "d"] {
        assert_eq!(first.post("/api/v1/pods", pod(name, 1, 1)).await.0, StatusCode::CREATED);
    }
    let (_, page) = first.get("/api/v1/namespaces/default/pods?limit=2").await;
    let token = page["continue"].as_str().expect("a continue token");
    assert_eq!(second.delete("/api/v1/namespaces/default/pods/c?grace_period_seconds=0").await.0, StatusCode::OK);
    assert_eq!(second.post("/api/v1/pods", pod("bb", 1, 1)).await.0, StatusCode::CREATED);
    let (_, rest) = second.get(&format!("/api/v1/namespaces/default/pods?limit=2&continue={token}")).await;
    let names: Vec<&str> = rest["items"].as_array().unwrap().iter().map(|p| p["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["c", "d"], "{rest}");
    assert_eq!(rest["resource_version"], page["resource_version"]);
    first.stop().await;
    second.stop().await;
}

/// Two servers bind a pod each to one node at the same moment, with room for one: the node
/// is never oversold. Each bind counts the node's pods in its own cache, which does not have
/// the other's yet; the node's guard in etcd makes one of them count again.
#[tokio::test]
async fn binds_to_one_node_through_two_servers_at_once_never_oversell_it() {
    let etcd = Etcd::start(1).await;
    let (a, b) = (TestServer::start(on_etcd(&etcd, "/room")).await, TestServer::start(on_etcd(&etcd, "/room")).await);
    for trial in 0..5 {
        // A node of its own each time: a deleted bound pod waits for an agent that is not here.
        let node = format!("small-{trial}");
        common::add_node(&a, &node, 1000, 1 << 30, 10).await;
        let names = [format!("left-{trial}"), format!("right-{trial}")];
        for name in &names {
            assert_eq!(a.post("/api/v1/pods", pod(name, 600, 1 << 20)).await.0, StatusCode::CREATED);
        }
        shepherd_testing::poll(Duration::from_secs(5), "both pods on the second server", || async {
            let (status, _) = b.get(&format!("/api/v1/namespaces/default/pods/{}", names[1])).await;
            (status == StatusCode::OK).then_some(())
        })
        .await;
        let paths = names.clone().map(|name| format!("/api/v1/namespaces/default/pods/{name}/binding"));
        let target = serde_json::json!({"target": {"kind": "Node", "name": node}});
        let ((left, _), (right, _)) = tokio::join!(a.post(&paths[0], target.clone()), b.post(&paths[1], target.clone()));
        let bound = [left, right].iter().filter(|s| **s == StatusCode::CREATED).count();
        assert_eq!(bound, 1, "trial {trial}: one bind fits 1000m, two do not ({left}, {right})");
    }
    a.stop().await;
    b.stop().await;
}

/// A value under the prefix that is no Shepherd object (written with etcdctl): servers
/// still start without it, and a read of its name or a write to it says which key is at fault.
#[tokio::test]
async fn a_bad_value_in_etcd_is_left_out_and_named_when_read_or_written_to() {
    let etcd = Etcd::start(1).await;
    let first = TestServer::start(on_etcd(&etcd, "/bad")).await;
    let mut client = etcd_client::Client::connect(etcd.endpoints(), None).await.unwrap();
    client.put("/bad/pods/default/garbage", "{not json", None).await.unwrap();
    first.stop().await;
    let server = TestServer::start(on_etcd(&etcd, "/bad")).await;
    let (status, error) = server.post("/api/v1/pods", pod("garbage", 1, 1)).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{error}");
    let (status, error) = server.get("/api/v1/namespaces/default/pods/garbage").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("/bad/pods/default/garbage in etcd is not a Shepherd object"), "{error}");
    assert_eq!(server.post("/api/v1/pods", pod("fine", 1, 1)).await.0, StatusCode::CREATED);
    server.stop().await;
}

/// Servers that start together race to mark an empty prefix as Shepherd's: the losers
/// find the winner's marker and start too.
#[tokio::test]
async fn stores_opening_together_on_an_empty_prefix_all_open() {
    let etcd = Etcd::start(1).await;
    for round in 0..10 {
        let prefix = format!("/marked-{round}");
        let (a, b, c) = tokio::join!(store_on(&etcd, &prefix), store_on(&etcd, &prefix), store_on(&etcd, &prefix));
        for store in [a, b, c] {
            store.close().await;
        }
    }
}
