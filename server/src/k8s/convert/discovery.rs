//! The `discovery.k8s.io/v1` group: a Service's endpoints as the one EndpointSlice that
//! kubectl and other clients read, derived as the Endpoints object is, with the labels
//! Kubernetes' EndpointSlice controller puts on the slices it manages.

use k8s_openapi::api::discovery::v1 as discovery;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use shared::model::{Endpoint, Service};

use super::meta::{some, time};
use crate::query::{FieldTerm, Filter};

/// The label that names a slice's Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label that names who manages a slice, and the value Kubernetes' controller writes.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "endpointslice-controller.k8s.io";

/// A service's endpoints as one EndpointSlice named after the service: the ready pods
/// `ready` and `serving`, the others neither (terminating pods are in no list, so none is
/// `terminating`), and the service's target ports.
pub fn endpoint_slice(service: &Service) -> discovery::EndpointSlice {
    let m = &service.metadata;
    let mut labels = m.labels.clone();
    labels.insert(SERVICE_NAME_LABEL.into(), m.name.clone());
    labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    let metadata = meta::ObjectMeta {
        name: some(&m.name),
        namespace: some(&m.namespace),
        uid: Some(slice_uid(&m.uid)),
        labels: Some(labels),
        resource_version: (m.resource_version > 0).then(|| m.resource_version.to_string()),
        creation_timestamp: m.created_at.map(time),
        owner_references: Some(vec![meta::OwnerReference {
            api_version: "v1".into(),
            kind: "Service".into(),
            name: m.name.clone(),
            uid: m.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]),
        ..Default::default()
    };
    let endpoint = |e: &Endpoint, ready: bool| discovery::Endpoint {
        addresses: vec![e.ip.clone()],
        conditions: Some(discovery::EndpointConditions { ready: Some(ready), serving: Some(ready), terminating: Some(false) }),
        node_name: some(&e.node_name),
        target_ref: Some(super::core::pod_reference(&m.namespace, &e.pod)),
        ..Default::default()
    };
    let ready = service.status.endpoints.iter().map(|e| endpoint(e, true));
    let not_ready = service.status.not_ready_endpoints.iter().map(|e| endpoint(e, false));
    let ports = service
        .spec
        .ports
        .iter()
        // An unnamed port's name is "", never absent, as the EndpointSlice controller
        // writes it: kubectl's describe reads it without a check.
        .map(|p| discovery::EndpointPort {
            name: Some(p.name.clone()),
            port: Some(p.target_port),
            protocol: Some(p.protocol_name()),
            app_protocol: None,
        })
        .collect();
    discovery::EndpointSlice { address_type: "IPv4".into(), endpoints: ready.chain(not_ready).collect(), metadata, ports: Some(ports) }
}

/// The slice's own uid, told apart from its Service's (its owner) and the same at every read,
/// since the slice is drawn from the Service rather than stored: the Service's uid with its
/// random bits turned by a fixed mask (the version and variant bits stay, so it is a v4 uid).
fn slice_uid(service_uid: &str) -> String {
    const MASK: [u8; 16] = [0x5e, 0x1c, 0xe5, 0x00, 0xa7, 0x3b, 0x0d, 0x91, 0x3f, 0x62, 0xc4, 0x18, 0x77, 0x09, 0xb2, 0xe6];
    match uuid::Uuid::parse_str(service_uid) {
        Ok(uid) => {
            let mut bytes = *uid.as_bytes();
            bytes.iter_mut().zip(MASK).for_each(|(byte, mask)| *byte ^= mask);
            uuid::Uuid::from_bytes(bytes).to_string()
        }
        Err(_) => format!("{service_uid}-endpointslice"),
    }
}

/// A selection of slices as one of the Services they come from: the service-name label is
/// the Service's name, and the managed-by label, Shepherd's controller's value, holds for
/// every slice. Any other label is the Service's own.
pub fn select_slices(filter: &mut Filter) {
    if let Some(name) = filter.labels.match_labels.remove(SERVICE_NAME_LABEL) {
        filter.fields.push(FieldTerm { field: "metadata.name".into(), value: name, equal: true });
    }
    if filter.labels.match_labels.get(MANAGED_BY_LABEL).is_some_and(|by| by == MANAGED_BY) {
        filter.labels.match_labels.remove(MANAGED_BY_LABEL);
    }
}

#[cfg(test)]
mod tests {
    use shared::model::{Object, ObjectMeta, ServicePort};

    use super::*;
    use crate::query::ListParams;

    fn service() -> Service {
        let mut service = Service { metadata: ObjectMeta::named("default", "web"), ..Default::default() };
        service.metadata.labels.insert("tier".into(), "front".into());
        service.spec.ports = vec![ServicePort { name: "http".into(), port: 80, target_port: 8080, ..Default::default() }];
        service.status.endpoints = vec![Endpoint { ip: "10.77.0.4".into(), pod: "web-a".into(), node_name: "n1".into() }];
        service.status.not_ready_endpoints = vec![Endpoint { ip: "10.77.0.5".into(), pod: "web-b".into(), node_name: "n1".into() }];
        service
    }

    #[test]
    fn a_slice_has_a_uid_of_its_own_and_the_same_at_every_read() {
        let mut service = service();
        service.metadata.uid = "6f1c2d3e-4a5b-4c6d-8e7f-0123456789ab".into();
        let uid = endpoint_slice(&service).metadata.uid.unwrap();
        assert_ne!(uid, service.metadata.uid);
        assert_eq!(endpoint_slice(&service).metadata.uid.unwrap(), uid);
        let parsed = uuid::Uuid::parse_str(&uid).unwrap();
        assert_eq!((parsed.get_version_num(), parsed.get_variant()), (4, uuid::Variant::RFC4122));
        let owner = &endpoint_slice(&service).metadata.owner_references.unwrap()[0];
        assert_eq!(owner.uid, service.metadata.uid);
    }

    #[test]
    fn a_slice_holds_ready_and_not_ready_pods_with_their_conditions_and_the_target_ports() {
        let slice = endpoint_slice(&service());
        let labels = slice.metadata.labels.clone().unwrap();
        assert_eq!(
            (labels[SERVICE_NAME_LABEL].as_str(), labels[MANAGED_BY_LABEL].as_str(), labels["tier"].as_str()),
            ("web", MANAGED_BY, "front")
        );
        assert_eq!(slice.address_type, "IPv4");
        let conditions: Vec<(String, Option<bool>, Option<bool>)> = slice
            .endpoints
            .iter()
            .map(|e| (e.addresses[0].clone(), e.conditions.as_ref().unwrap().ready, e.conditions.as_ref().unwrap().serving))
            .collect();
        assert_eq!(conditions, [("10.77.0.4".into(), Some(true), Some(true)), ("10.77.0.5".into(), Some(false), Some(false))]);
        let port = &slice.ports.unwrap()[0];
        assert_eq!((port.name.as_deref(), port.port, port.protocol.as_deref()), (Some("http"), Some(8080), Some("TCP")));
    }

    #[test]
    fn kubectls_selection_of_a_services_slices_selects_that_service() {
        let params = ListParams {
            label_selector: Some(format!("{SERVICE_NAME_LABEL}=web,{MANAGED_BY_LABEL}={MANAGED_BY}")),
            ..ListParams::default()
        };
        let mut filter = Filter::new(shared::model::Kind::Service, Some("default".into()), &params).unwrap();
        select_slices(&mut filter);
        let web = Object::Service(service());
        let mut other = service();
        other.metadata.name = "db".into();
        assert!(filter.matches(&web) && !filter.matches(&Object::Service(other)));

        let params = ListParams { label_selector: Some(format!("{MANAGED_BY_LABEL}=someone-else")), ..ListParams::default() };
        let mut filter = Filter::new(shared::model::Kind::Service, None, &params).unwrap();
        select_slices(&mut filter);
        assert!(!filter.matches(&web), "Shepherd manages every slice");
    }
}
