//! The Service address repair, in the role of kube-apiserver's repair controllers for cluster
//! IPs and node ports: a Service stored without the addresses its type needs (written before
//! the server allocated them, or by an older server) gets them, taken as a create takes them
//! ([`crate::service_addresses::claim`]), so that the node proxies program it. Level-triggered
//! over every Service at each resync, not only when one changes.

use shared::model::{Kind, Object, Service, Time};

use super::{Action, Context, Controller, Result, store_error};
use crate::ops;
use crate::store::{Key, Store, StoreError, StoreEvent, Txn};

pub struct ServiceRepairController;

/// Whether `service` lacks a cluster IP (a headless one holds `None`, so lacks nothing) or,
/// as a `NodePort` Service, a node port.
pub fn needs_addresses(service: &Service) -> bool {
    let spec = &service.spec;
    spec.cluster_ip.is_empty() || (spec.is_node_port() && spec.ports.iter().any(|p| p.node_port == 0))
}

impl Controller for ServiceRepairController {
    const NAME: &'static str = "service-address-repair";

    fn watched(&self) -> &'static [Kind] {
        &[Kind::Service]
    }

    fn keys_for(&self, _store: &dyn Store, event: &StoreEvent) -> Vec<Key> {
        vec![Key::of(&event.object)]
    }

    fn all_keys(&self, store: &dyn Store) -> Vec<Key> {
        store.list(Kind::Service, None).1.iter().map(|s| Key::of(s)).collect()
    }

    async fn reconcile(&self, key: &Key, ctx: &Context, _now: Time) -> Result<Action> {
        let service = match ctx.store.get(key).as_deref() {
            Some(Object::Service(s)) if needs_addresses(s) => s.clone(),
            _ => return Ok(Action::AwaitChange),
        };
        // The stored Service itself as the update, at its version: what it lacks is claimed.
        let write = ops::update_service(service, ctx.config.service_ranges);
        match ctx.store.commit(Txn::new().with(write)).await {
            Ok(_) => {
                tracing::info!(service = %key, "gave a stored Service the addresses it lacked");
                Ok(Action::AwaitChange)
            }
            Err(StoreError::NotFound { .. }) => Ok(Action::AwaitChange),
            Err(e) => Err(store_error(Self::NAME, key, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use shared::model::service;

    use super::super::fixtures;
    use super::*;
    use crate::resources::stamp_new;

    #[tokio::test]
    async fn a_service_stored_without_addresses_gets_them_and_others_are_left_alone() {
        let ctx = fixtures::context().await;
        let mut old: Service = serde_json::from_str(include_str!("../../../examples/service.json")).unwrap();
        old.spec.type_ = service::NODE_PORT.into();
        stamp_new(&mut old, chrono::Utc::now());
        let mut headless = old.clone();
        headless.metadata.name = "headless".into();
        headless.spec.type_ = service::CLUSTER_IP.into();
        headless.spec.cluster_ip = service::HEADLESS.into();
        // Stored as an older server stored them, without the create's allocation.
        fixtures::put(&ctx, Object::Service(old)).await;
        fixtures::put(&ctx, Object::Service(headless)).await;

        let key = Key::new(Kind::Service, "default", "web-service");
        ServiceRepairController.reconcile(&key, &ctx, chrono::Utc::now()).await.unwrap();
        let repaired = match ctx.store.get(&key).as_deref() {
            Some(Object::Service(s)) => s.clone(),
            other => panic!("{other:?}"),
        };
        let ranges = ctx.config.service_ranges;
        let ip = repaired.spec.cluster_ip.parse().expect("an address");
        assert!(ranges.cluster_ips.offset_of(ip).is_some(), "{} in {}", repaired.spec.cluster_ip, ranges.cluster_ips);
        assert!(ranges.node_ports.contains(repaired.spec.ports[0].node_port), "{:?}", repaired.spec.ports);
        assert!(!needs_addresses(&repaired));

        let revision = ctx.store.revision();
        ServiceRepairController.reconcile(&key, &ctx, chrono::Utc::now()).await.unwrap();
        ServiceRepairController.reconcile(&Key::new(Kind::Service, "default", "headless"), &ctx, chrono::Utc::now()).await.unwrap();
        assert_eq!(ctx.store.revision(), revision, "nothing more to give: nothing written");
        assert_eq!(ServiceRepairController.all_keys(ctx.store.as_ref()).len(), 2, "the resync covers every Service");
    }
}
