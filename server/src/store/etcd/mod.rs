//! The etcd store: objects in etcd under one prefix, as kube-apiserver keeps them, with
//! etcd's revision as every resource_version. Reads and watches are served from a cache in
//! memory that an etcd watch feeds, as kube-apiserver's watch cache is fed, so that a write
//! through any server reaches the watchers of every server. Writes are etcd transactions
//! that compare each key's mod revision. History is compacted on a schedule, as
//! kube-apiserver asks etcd to every 5 minutes.
//!
//! Layout: `layout` (keys, values, the marker of a Shepherd prefix), `feed` (the list and
//! watch that keep the cache), `writer` (the transactions).

mod feed;
mod layout;
mod writer;

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, ConnectOptions, GetOptions, TxnOp};
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::cache::{Cache, CacheBackend};
use super::encryption::Encryption;
use super::error::{Result, StoreError};
use super::txn::{Outcome, Txn};
use super::watchers::History;
use feed::{on_a_member, unavailable};
use layout::Layout;

/// How the server reaches etcd.
#[derive(Debug, Clone)]
pub struct EtcdSettings {
    /// `http://host:port` of each member.
    pub endpoints: Vec<String>,
    /// Where this cluster's keys live (`/registry`): several clusters can share an etcd.
    pub prefix: String,
    /// How often history older than the last interval is compacted away (zero: never).
    pub compaction_interval: Duration,
}

impl EtcdSettings {
    /// kube-apiserver's defaults: `/registry`, compaction every 5 minutes.
    pub fn new(endpoints: Vec<String>) -> EtcdSettings {
        EtcdSettings { endpoints, prefix: "/registry".into(), compaction_interval: Duration::from_secs(300) }
    }
}

/// Transactions waiting for the writer before `commit` callers wait for room.
const QUEUE_DEPTH: usize = 8192;
/// How long a call to etcd may take before the store answers that etcd is unavailable.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The [`Store`](super::Store) on etcd.
#[derive(Clone)]
pub struct EtcdStore {
    handle: Arc<Handle>,
}

/// What the feed, the writer and the store's handle share.
struct Inner {
    client: Client,
    layout: Layout,
    cache: Arc<Cache>,
    /// The revision the cache has applied: of its changes, and of the keys that are none.
    applied: watch::Sender<u64>,
    /// Ends the feed and the compaction loop, once the writer is done.
    shutdown: CancellationToken,
}

struct Handle {
    inner: Arc<Inner>,
    queue: RwLock<Option<mpsc::Sender<writer::Request>>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl EtcdStore {
    /// Connects to etcd, checks that the prefix is Shepherd's (marking an empty one), lists
    /// it into the cache and starts the watch, the writer and the compaction loop. Secrets
    /// are written with `encryption` and read with it.
    pub async fn connect(settings: &EtcdSettings, encryption: Encryption, history: impl Into<History>) -> Result<EtcdStore> {
        let layout = Layout::new(&settings.prefix, encryption)?;
        let endpoints = settings.endpoints.join(",");
        let options = ConnectOptions::new().with_connect_timeout(CALL_TIMEOUT).with_timeout(CALL_TIMEOUT);
        let client = Client::connect(&settings.endpoints, Some(options))
            .await
            .map_err(|e| StoreError::Unavailable(format!("cannot reach etcd at {endpoints}: {e}")))?;
        claim(&client, &layout).await.map_err(|e| match e {
            StoreError::Unavailable(why) => StoreError::Unavailable(format!("{why} (tried {endpoints})")),
            other => other,
        })?;
        let snapshot = feed::list(&client, &layout).await?;
        let (revision, objects) = (snapshot.revision, snapshot.objects.len());
        let cache = Arc::new(Cache::new(snapshot, history.into()));
        let (applied, _) = watch::channel(revision);
        let inner = Arc::new(Inner { client, layout, cache, applied, shutdown: CancellationToken::new() });
        let (queue, requests) = mpsc::channel(QUEUE_DEPTH);
        let mut tasks = vec![tokio::spawn(feed::run(inner.clone())), tokio::spawn(writer::run(inner.clone(), requests))];
        if !settings.compaction_interval.is_zero() {
            tasks.push(tokio::spawn(compact_history(inner.clone(), settings.compaction_interval)));
        }
        tracing::info!("etcd store at {endpoints} under {}: {objects} objects at revision {revision}", inner.layout.prefix());
        Ok(EtcdStore { handle: Arc::new(Handle { inner, queue: RwLock::new(Some(queue)), tasks: Mutex::new(tasks) }) })
    }
}

/// Checks that the prefix holds a Shepherd store, and marks it as one when it holds nothing:
/// a prefix with another program's keys (a Kubernetes cluster's `/registry`) is refused.
/// Servers that start together race to mark it: a loser finds the winner's marker.
async fn claim(client: &Client, layout: &Layout) -> Result<()> {
    let kv = client.kv_client();
    loop {
        let marker = on_a_member(|| {
            let mut kv = kv.clone();
            async move { kv.get(layout.marker(), None).await }
        })
        .await
        .map_err(|e| unavailable("read the store's marker", &e))?;
        if let Some(found) = marker.kvs().first() {
            if found.value() == Layout::marker_value().as_bytes() {
                return Ok(());
            }
            return Err(StoreError::Unusable(format!(
                "etcd's key {} is not Shepherd's marker: the prefix {} belongs to something else; choose another --etcd-prefix",
                layout.marker(),
                layout.prefix()
            )));
        }
        let options = GetOptions::new().with_range(feed::prefix_end(&layout.range())).with_keys_only().with_limit(1);
        let any = on_a_member(|| {
            let (mut kv, options) = (kv.clone(), options.clone());
            async move { kv.get(layout.range(), Some(options)).await }
        })
        .await
        .map_err(|e| unavailable("list the prefix", &e))?;
        match any.kvs().first() {
            // Another server marked it meanwhile: read its marker.
            Some(found) if found.key() == layout.marker().as_bytes() => continue,
            Some(found) => {
                return Err(StoreError::Unusable(format!(
                    "etcd holds keys under {} that Shepherd did not write (such as {}): another cluster's data; choose another --etcd-prefix",
                    layout.prefix(),
                    String::from_utf8_lossy(found.key())
                )));
            }
            None => {}
        }
        let mark = etcd_client::Txn::new().when([Compare::version(layout.marker(), CompareOp::Equal, 0)]).and_then([TxnOp::put(
            layout.marker(),
            Layout::marker_value(),
            None,
        )]);
        let marked = on_a_member(|| {
            let (mut kv, mark) = (kv.clone(), mark.clone());
            async move { kv.txn(mark).await }
        })
        .await
        .map_err(|e| unavailable("mark the prefix", &e))?;
        if marked.succeeded() {
            return Ok(());
        }
    }
}

/// Every `interval`, compacts etcd's history up to the revision seen one interval before,
/// as kube-apiserver does: etcd keeps at least an interval of history for watches to resume.
async fn compact_history(inner: Arc<Inner>, interval: Duration) {
    let mut tick = tokio::time::interval_at(Instant::now() + interval, interval);
    let mut previous = 0u64;
    loop {
        tokio::select! {
            _ = inner.shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if previous > 0 {
            let at = i64::try_from(previous).unwrap_or(i64::MAX);
            match inner.client.kv_client().compact(at, None).await {
                Ok(_) => tracing::debug!("compacted etcd's history up to revision {previous}"),
                // Another server compacted there first, or beyond.
                Err(e) if e.to_string().contains("compacted") => {}
                Err(e) => tracing::warn!("cannot compact etcd's history: {e}"),
            }
        }
        previous = *inner.applied.borrow();
    }
}

impl CacheBackend for EtcdStore {
    fn name(&self) -> &'static str {
        "etcd"
    }

    fn cache(&self) -> &Cache {
        &self.handle.inner.cache
    }

    fn commit_txn(&self, txn: Txn) -> BoxFuture<'static, Result<Vec<Outcome>>> {
        let queue = self.handle.queue.read().expect("store queue lock").clone();
        async move {
            let queue = queue.ok_or(StoreError::Closed)?;
            let (reply, answer) = oneshot::channel();
            queue.send(writer::Request::new(txn, reply)).await.map_err(|_| StoreError::Closed)?;
            answer.await.map_err(|_| StoreError::Closed)?
        }
        .boxed()
    }

    fn reach(&self, revision: u64, limit: Duration) -> BoxFuture<'static, bool> {
        let inner = self.handle.inner.clone();
        async move { writer::wait_for(&inner, revision, limit).await.is_ok() }.boxed()
    }

    fn shut(&self) -> BoxFuture<'static, ()> {
        let handle = self.handle.clone();
        async move {
            // The writer commits what is queued, with the feed still bringing its revisions.
            drop(handle.queue.write().expect("store queue lock").take());
            let tasks = std::mem::take(&mut *handle.tasks.lock().expect("store tasks lock"));
            let mut tasks = tasks.into_iter();
            let (feed, writer) = (tasks.next(), tasks.next());
            if let Some(writer) = writer {
                let _ = writer.await;
            }
            handle.inner.shutdown.cancel();
            for task in feed.into_iter().chain(tasks) {
                let _ = task.await;
            }
            handle.inner.cache.watchers.lock().expect("watchers lock").close();
        }
        .boxed()
    }
}
