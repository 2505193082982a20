//! The endpoints controller: a service's `status.endpoints` are the IPs of the running,
//! ready pods in its namespace that its selector matches, and `status.not_ready_endpoints`
//! those of the others that have an address and have not finished (Kubernetes'
//! `notReadyAddresses`); sorted, rewritten only on change.

use shared::model::{Endpoint, Kind, Object, Pod, Service, Time};

use super::{Action, Context, Controller, Result, store_error};
use crate::ops;
use crate::store::{Key, Store, StoreError, StoreEvent, Txn};

pub struct EndpointsController;

fn selects(service: &Service, pod: &Pod) -> bool {
    !service.spec.selector.is_empty()
        && pod.metadata.namespace == service.metadata.namespace
        && service.spec.selector.iter().all(|(k, v)| pod.metadata.labels.get(k) == Some(v))
}

/// The endpoints a service should have, given every pod of its namespace: the ready ones,
/// and the not ready ones. A terminating or finished pod, or one without an address, is
/// in neither, as in Kubernetes' endpoints controller.
pub fn endpoints_for<'a>(service: &Service, pods: impl Iterator<Item = &'a Pod>) -> (Vec<Endpoint>, Vec<Endpoint>) {
    let (mut ready, mut not_ready) = (Vec::new(), Vec::new());
    let listed = pods.filter(|p| {
        selects(service, p) && !p.status.pod_ip.is_empty() && p.metadata.deletion_timestamp.is_none() && !p.status.phase.is_terminal()
    });
    for pod in listed {
        let endpoint = Endpoint { ip: pod.status.pod_ip.clone(), pod: pod.metadata.name.clone(), node_name: pod.spec.node_name.clone() };
        if pod.is_ready() { &mut ready } else { &mut not_ready }.push(endpoint);
    }
    ready.sort();
    not_ready.sort();
    (ready, not_ready)
}

impl Controller for EndpointsController {
    const NAME: &'static str = "endpoints-controller";

    fn watched(&self) -> &'static [Kind] {
        &[Kind::Service, Kind::Pod]
    }

    fn keys_for(&self, store: &dyn Store, event: &StoreEvent) -> Vec<Key> {
        match &*event.object {
            Object::Service(_) => vec![Key::of(&event.object)],
            Object::Pod(pod) => {
                let prev = match event.prev.as_deref() {
                    Some(Object::Pod(p)) => Some(p),
                    _ => None,
                };
                store
                    .list(Kind::Service, Some(&pod.metadata.namespace))
                    .1
                    .iter()
                    .filter(|s| match &***s {
                        Object::Service(s) => selects(s, pod) || prev.is_some_and(|p| selects(s, p)),
                        _ => false,
                    })
                    .map(|s| Key::of(s))
                    .collect()
            }
            _ => Vec::new(),
        }
    }

    fn all_keys(&self, store: &dyn Store) -> Vec<Key> {
        store.list(Kind::Service, None).1.iter().map(|s| Key::of(s)).collect()
    }

    async fn reconcile(&self, key: &Key, ctx: &Context, _now: Time) -> Result<Action> {
        let service = match ctx.store.get(key).as_deref() {
            Some(Object::Service(s)) => s.clone(),
            _ => return Ok(Action::AwaitChange),
        };
        let (_, objects) = ctx.store.list(Kind::Pod, Some(&service.metadata.namespace));
        let pods = objects.iter().filter_map(|o| match &**o {
            Object::Pod(p) => Some(p),
            _ => None,
        });
        let (ready, not_ready) = endpoints_for(&service, pods);
        if ready == service.status.endpoints && not_ready == service.status.not_ready_endpoints {
            return Ok(Action::AwaitChange);
        }
        let write = ops::modify::<Service>(key.clone(), move |_, s| {
            s.status.endpoints = ready.clone();
            s.status.not_ready_endpoints = not_ready.clone();
            Ok(())
        });
        match ctx.store.commit(Txn::new().with(write)).await {
            Ok(_) | Err(StoreError::NotFound { .. }) => Ok(Action::AwaitChange),
            Err(e) => Err(store_error(Self::NAME, key, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use shared::model::{Condition, PodPhase, conditions};

    use super::super::fixtures;
    use super::*;
    use crate::resources::stamp_new;

    #[tokio::test]
    async fn endpoints_are_the_matching_pods_that_are_not_terminating_ready_or_not() {
        let ctx = fixtures::context().await;
        let mut service: Service = serde_json::from_str(include_str!("../../../examples/service.json")).unwrap();
        stamp_new(&mut service, chrono::Utc::now());
        fixtures::put(&ctx, Object::Service(service)).await;
        let mut a = fixtures::pod("a", &[("app", "web")], "n1", PodPhase::Running);
        a.status.pod_ip = "10.20.0.2".into();
        let mut b = fixtures::pod("b", &[("app", "web")], "n1", PodPhase::Pending);
        b.status.pod_ip = "10.20.0.3".into();
        let mut c = fixtures::pod("c", &[("app", "db")], "n1", PodPhase::Running);
        c.status.pod_ip = "10.20.0.4".into();
        let mut leaving = fixtures::pod("leaving", &[("app", "web")], "n1", PodPhase::Running);
        leaving.status.pod_ip = "10.20.0.5".into();
        leaving.metadata.deletion_timestamp = Some(chrono::Utc::now());
        let mut unready = fixtures::pod("unready", &[("app", "web")], "n1", PodPhase::Running);
        unready.status.pod_ip = "10.20.0.6".into();
        let not_ready = Condition { type_: conditions::READY.into(), status: conditions::FALSE.into(), ..Condition::default() };
        unready.status.conditions = vec![not_ready];
        let mut done = fixtures::pod("done", &[("app", "web")], "n1", PodPhase::Succeeded);
        done.status.pod_ip = "10.20.0.7".into();
        for p in [a, b, c, leaving, unready, done] {
            fixtures::put(&ctx, Object::Pod(p)).await;
        }
        let key = Key::new(Kind::Service, "default", "web-service");
        EndpointsController.reconcile(&key, &ctx, chrono::Utc::now()).await.unwrap();
        let revision = ctx.store.revision();
        EndpointsController.reconcile(&key, &ctx, chrono::Utc::now()).await.unwrap();
        assert_eq!(ctx.store.revision(), revision, "a second reconcile writes nothing");
        match ctx.store.get(&key).as_deref() {
            Some(Object::Service(s)) => {
                assert_eq!(s.status.endpoints, vec![Endpoint { ip: "10.20.0.2".into(), pod: "a".into(), node_name: "n1".into() }]);
                let pending = Endpoint { ip: "10.20.0.3".into(), pod: "b".into(), node_name: "n1".into() };
                let unready = Endpoint { ip: "10.20.0.6".into(), pod: "unready".into(), node_name: "n1".into() };
                assert_eq!(s.status.not_ready_endpoints, vec![pending, unready]);
            }
            _ => panic!("service missing"),
        }
    }
}
