//! Each API server's identity, `<hostname>_<uuid>` as client-go makes one, and the lease
//! that announces it (`kube-system/apiserver-…`, labelled as kube-apiserver labels its own),
//! renewed while the server runs and deleted when it stops cleanly, so that `/api/v1/info`
//! can say which servers answer and where.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use shared::model::{
    ADVERTISE_URL_ANNOTATION, IDENTITY_COMPONENT, IDENTITY_LABEL, Kind, Lease, LeaseSpec, Object, ObjectMeta, SYSTEM_NAMESPACE, Time,
};
use tokio_util::sync::CancellationToken;

use crate::ops;
use crate::store::{Change, Key, Store, StoreError, Write, commit_one};

/// How often a server renews its identity lease (kube-apiserver's period).
pub const IDENTITY_RENEW_PERIOD: Duration = Duration::from_secs(10);

/// How long an identity lease counts. kube-apiserver's last an hour, for its storage
/// version garbage collection; Shepherd's say only which servers answer now, so three
/// missed renewals end one.
pub const IDENTITY_LEASE_DURATION: Duration = Duration::from_secs(30);

/// A new identity for a server on this host: `<hostname>_<uuid>`.
pub fn new_identity() -> String {
    format!("{}_{}", agent::node::hostname(), uuid::Uuid::new_v4())
}

/// The name of the identity lease of `identity`: `apiserver-` and the identity, made a valid
/// object name (lower case; `_` and anything else but letters, digits, `-` and `.` become `-`).
pub fn lease_name(identity: &str) -> String {
    let name: String =
        identity.to_ascii_lowercase().chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '-' }).collect();
    format!("apiserver-{name}")
}

/// A server that answers, as its fresh identity lease says at `now`.
pub fn servers(store: &dyn Store, now: Time) -> Vec<shared::api::ApiServer> {
    let (_, leases) = store.list(Kind::Lease, None);
    let mut servers: Vec<_> = leases
        .iter()
        .filter_map(|object| match &**object {
            Object::Lease(l) if is_identity_lease(l) => {
                let identity = l.spec.holder_at(now)?.to_string();
                let url = l.metadata.annotations.get(ADVERTISE_URL_ANNOTATION).cloned().unwrap_or_default();
                Some(shared::api::ApiServer { identity, url })
            }
            _ => None,
        })
        .collect();
    servers.sort_by(|a, b| a.identity.cmp(&b.identity));
    servers
}

fn is_identity_lease(lease: &Lease) -> bool {
    lease.metadata.namespace == SYSTEM_NAMESPACE && lease.metadata.labels.get(IDENTITY_LABEL).is_some_and(|v| v == IDENTITY_COMPONENT)
}

/// Announces `identity` (reachable at `url`) now, then renews it every
/// [`IDENTITY_RENEW_PERIOD`] until `shutdown`, and deletes it then. Each renewal also
/// deletes the identity leases of servers that stopped renewing a lease duration ago, as
/// kube-apiserver's lease garbage collector does.
pub struct Announcer {
    store: Arc<dyn Store>,
    identity: String,
    url: String,
}

impl Announcer {
    pub fn new(store: Arc<dyn Store>, identity: &str, url: &str) -> Self {
        Announcer { store, identity: identity.to_string(), url: url.to_string() }
    }

    pub async fn announce(&self) -> Result<(), StoreError> {
        let now = chrono::Utc::now();
        let (identity, url) = (self.identity.clone(), self.url.clone());
        let write = Write::new(self.key(), move |_, current| {
            let spec = LeaseSpec {
                holder_identity: identity.clone(),
                lease_duration_seconds: ops::lease_seconds(IDENTITY_LEASE_DURATION),
                renew_time: Some(now),
                ..LeaseSpec::default()
            };
            let lease = match current {
                Some(Object::Lease(stored)) => {
                    let mut lease = Lease { spec, ..stored.clone() };
                    lease.metadata.annotations.insert(ADVERTISE_URL_ANNOTATION.to_string(), url.clone());
                    lease
                }
                _ => {
                    let mut lease =
                        Lease { metadata: ObjectMeta::named(SYSTEM_NAMESPACE, &lease_name(&identity)), spec, ..Lease::default() };
                    lease.metadata.labels = BTreeMap::from([(IDENTITY_LABEL.to_string(), IDENTITY_COMPONENT.to_string())]);
                    lease.metadata.annotations = BTreeMap::from([(ADVERTISE_URL_ANNOTATION.to_string(), url.clone())]);
                    crate::resources::stamp_new(&mut lease, now);
                    lease
                }
            };
            Ok(Change::Put(Object::Lease(lease)))
        });
        commit_one(&*self.store, write).await.map(|_| ())
    }

    /// Renews until `shutdown`, then withdraws the lease.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(IDENTITY_RENEW_PERIOD);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {
                    if let Err(e) = self.announce().await {
                        tracing::warn!("cannot renew the identity lease of {}: {e}", self.identity);
                    }
                    self.collect_expired(chrono::Utc::now()).await;
                }
            }
        }
        let gone = Write::new(self.key(), |_, current| Ok(if current.is_some() { Change::Delete } else { Change::Keep }));
        if let Err(e) = commit_one(&*self.store, gone).await {
            tracing::warn!("cannot delete the identity lease of {}: {e}", self.identity);
        }
    }

    /// Deletes other servers' identity leases that expired a lease duration before `now`.
    async fn collect_expired(&self, now: Time) {
        let stale = now - chrono::Duration::from_std(IDENTITY_LEASE_DURATION).unwrap_or_default();
        let (_, leases) = self.store.list(Kind::Lease, Some(SYSTEM_NAMESPACE));
        for object in leases {
            let Object::Lease(lease) = &*object else { continue };
            if !is_identity_lease(lease) || lease.spec.holder_at(stale).is_some() || lease.spec.holder_identity == self.identity {
                continue;
            }
            let key = Key::of(&object);
            if let Err(e) = commit_one(&*self.store, ops::delete(key.clone(), lease.metadata.resource_version)).await {
                tracing::debug!("the expired identity lease {key} was not deleted: {e}");
            }
        }
    }

    fn key(&self) -> Key {
        Key::new(Kind::Lease, SYSTEM_NAMESPACE, &lease_name(&self.identity))
    }
}

#[cfg(test)]
mod tests {
    use shared::api::ApiServer;

    use super::*;
    use crate::store::CachedStore;

    #[tokio::test]
    async fn fresh_identities_are_the_servers_and_long_expired_ones_are_collected() {
        let store = CachedStore::in_memory(100);
        let a = Announcer::new(Arc::new(store.clone()), "Host_A", "http://a:1");
        let b = Announcer::new(Arc::new(store.clone()), "host_b", "");
        a.announce().await.unwrap();
        b.announce().await.unwrap();
        let now = chrono::Utc::now();
        let both = vec![
            ApiServer { identity: "Host_A".into(), url: "http://a:1".into() },
            ApiServer { identity: "host_b".into(), url: String::new() },
        ];
        assert_eq!(servers(&store, now), both);
        assert!(store.get(&Key::new(Kind::Lease, SYSTEM_NAMESPACE, "apiserver-host-a")).is_some(), "a valid object name");
        let second = |s: i64| now + chrono::Duration::seconds(s);
        assert!(servers(&store, second(31)).is_empty(), "not renewed for a lease duration");
        a.collect_expired(second(45)).await;
        assert_eq!(store.list(Kind::Lease, None).1.len(), 2, "expired for less than a lease duration: kept");
        a.collect_expired(second(61)).await;
        let (_, left) = store.list(Kind::Lease, None);
        assert_eq!(left.iter().map(|l| l.metadata().name.as_str()).collect::<Vec<_>>(), ["apiserver-host-a"], "its own is never collected");
    }
}
