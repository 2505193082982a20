//! What each kind means to the API: how a new object is defaulted, how it is validated,
//! and which fields a PUT may change (status and `spec.node_name` never: they have their
//! own subresources).

use serde::Serialize;
use serde::de::DeserializeOwned;
use shared::api::FieldError;
use shared::model::{
    ConfigMap, Deployment, Event, Lease, Namespace, Node, ObjectMeta, Pod, PodStatus, ReplicaSet, Secret, Service, Time, service,
};
use shared::registration::with_own_hostname;
use shared::validation;

use crate::service_addresses::carry_allocations;

/// What the API adds to `shared`'s [`shared::model::Resource`] (kind, metadata, the way in
/// and out of `Object`): the wire form, validation, and what a create and an update may set.
pub trait Resource: shared::model::Resource + Serialize + DeserializeOwned + PartialEq + Send + Sync {
    /// The `kind` the object carries, as sent.
    fn kind_field(&self) -> &str;
    fn validate(&self) -> Result<(), Vec<FieldError>>;
    /// Resets what a client may not set on create (status, bookkeeping) and fills defaults.
    fn prepare_create(&mut self);
    /// The stored object after a PUT of `new` onto `stored`.
    fn merge_update(stored: &Self, new: Self) -> Result<Self, Vec<FieldError>>;
    /// What an update takes from the stored object before `new` is validated, as
    /// Kubernetes' update strategies do; nothing but for a Service's allocations.
    fn carry_from(_stored: &Self, _new: &mut Self) -> Result<(), Vec<FieldError>> {
        Ok(())
    }
}

/// A kind with a `scale` subresource (deployments and ReplicaSets): the replicas it wants
/// and the pods it counts now.
pub trait Scalable: Resource {
    fn replicas(&self) -> i32;
    fn set_replicas(&mut self, replicas: i32);
    /// `status.replicas`.
    fn counted(&self) -> i32;
    fn selector(&self) -> &shared::selector::LabelSelector;
}

macro_rules! scalable {
    ($kind:ty) => {
        impl Scalable for $kind {
            fn replicas(&self) -> i32 {
                self.spec.replicas
            }
            fn set_replicas(&mut self, replicas: i32) {
                self.spec.replicas = replicas;
            }
            fn counted(&self) -> i32 {
                self.status.replicas
            }
            fn selector(&self) -> &shared::selector::LabelSelector {
                &self.spec.selector
            }
        }
    };
}

scalable!(Deployment);
scalable!(ReplicaSet);

/// Stamps identity on a new object: kind, uid, created_at, generation 1.
pub fn stamp_new<R: Resource>(object: &mut R, now: Time) {
    object.prepare_create();
    let meta = object.meta_mut();
    meta.uid = uuid::Uuid::new_v4().to_string();
    meta.created_at = Some(now);
    meta.resource_version = 0;
    meta.generation = 1;
    meta.deletion_timestamp = None;
    meta.deletion_grace_period_seconds = None;
}

/// Keeps the identity and bookkeeping of `stored` and the user-editable metadata of `new`;
/// a writer that sends no managed fields (one that never read them) keeps the stored ones.
fn merged_meta(stored: &ObjectMeta, new: &ObjectMeta) -> ObjectMeta {
    let managed_fields = if new.managed_fields.is_empty() { &stored.managed_fields } else { &new.managed_fields };
    ObjectMeta {
        labels: new.labels.clone(),
        annotations: new.annotations.clone(),
        managed_fields: managed_fields.clone(),
        ..stored.clone()
    }
}

macro_rules! kind_field {
    () => {
        fn kind_field(&self) -> &str {
            &self.kind
        }
    };
}

impl Resource for Pod {
    kind_field!();

    fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = validation::validate_pod(self).err().unwrap_or_default();
        if !self.spec.node_name.is_empty() {
            errors.push(FieldError {
                field: "spec.node_name".into(),
                message: "must be empty when a pod is created: the scheduler assigns it through the binding subresource".into(),
                ..Default::default()
            });
        }
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }

    fn prepare_create(&mut self) {
        self.kind = "Pod".into();
        self.status = PodStatus::default();
        self.spec.set_defaults();
    }

    fn merge_update(stored: &Self, new: Self) -> Result<Self, Vec<FieldError>> {
        let mut wanted = new.spec.clone();
        // A body without the node (a client that never read it) keeps the bound one.
        if wanted.node_name.is_empty() {
            wanted.node_name = stored.spec.node_name.clone();
        }
        if wanted.restart_policy.is_empty() {
            wanted.restart_policy = stored.spec.restart_policy.clone();
        }
        // What a client sends back without the defaults the server filled in is no change.
        wanted.set_defaults();
        // Kubernetes restarts a container whose image changes; the agent does not, so a new
        // image would be a spec no container runs.
        if wanted != stored.spec {
            return Err(vec![FieldError {
                field: "spec".into(),
                message: "a pod's spec cannot change after creation (not even an image: no container is restarted for it); delete the pod and create it again".into(),
                ..Default::default()
            }]);
        }
        let mut merged = stored.clone();
        merged.metadata = merged_meta(&stored.metadata, &new.metadata);
        validation::validate_pod(&merged)?;
        Ok(merged)
    }
}

impl Resource for Deployment {
    kind_field!();

    fn validate(&self) -> Result<(), Vec<FieldError>> {
        validation::validate_deployment(self)
    }

    fn prepare_create(&mut self) {
        self.kind = "Deployment".into();
        self.status = Default::default();
        self.set_defaults();
    }

    fn merge_update(stored: &Self, new: Self) -> Result<Self, Vec<FieldError>> {
        if new.spec.selector != stored.spec.selector {
            // As in apps/v1: a new selector would orphan the pods the old one counted.
            return Err(vec![FieldError {
                field: "spec.selector".into(),
                message: "field is immutable: create a new deployment for another selector".into(),
                ..Default::default()
            }]);
        }
        let mut merged = stored.clone();
        merged.metadata = merged_meta(&stored.metadata, &new.metadata);
        let mut defaulted = Deployment { spec: new.spec, ..Deployment::default() };
        defaulted.set_defaults();
        let spec = defaulted.spec;
        if merged.spec != spec {
            merged.spec = spec;
            merged.metadata.generation += 1;
        }
        validation::validate_deployment(&merged)?;
        Ok(merged)
    }
}

impl Resource for ReplicaSet {
    kind_field!();

    fn validate(&self) -> Result<(), Vec<FieldError>> {
        validation::validate_replicaset(self)
    }

    fn prepare_create(&mut self) {
        self.kind = "ReplicaSet".into();
        self.status = Default::default();
        self.spec.template.spec.set_defaults();
    }

    fn merge_update(stored: &Self, new: Self) -> Result<Self, Vec<FieldError>> {
        if new.spec.selector != stored.spec.selector {
            // As in apps/v1: a new selector would orphan the pods the old one counted.
            return Err(vec![FieldError {
                field: "spec.selector".into(),
                message: "field is immutable: create a new ReplicaSet for another selector".into(),
                ..Default::default()
            }]);
        }
        let mut merged = stored.clone();
        merged.metadata = merged_meta(&stored.metadata, &new.metadata);
        let mut spec = new.spec;
        spec.template.spec.set_defaults();
        if merged.spec != spec {
            merged.spec = spec;
            merged.metadata.generation += 1;
        }
        validation::validate_replicaset(&merged)?;
        Ok(merged)
    }
}

impl Resource for Service {
    kind_field!();

    fn validate(&self) -> Result<(), Vec<FieldError>> {
        validation::validate_service(self)
    }

    fn prepare_create(&mut self) {
        self.kind = "Service".into();
        self.status = Default::default();
        if self.spec.type_.is_empty() {
            self.spec.type_ = service::CLUSTER_IP.into();
        }
    }

    /// The selector may change, as in Kubernetes (the endpoints follow it); the cluster IP
    /// may not, and what the server allocated stays when a client leaves it out.
    fn merge_update(stored: &Self, new: Self) -> Result<Self, Vec<FieldError>> {
        let mut merged = stored.clone();
        merged.metadata = merged_meta(&stored.metadata, &new.metadata);
        let mut spec = new.spec;
        if spec.type_.is_empty() {
            spec.type_ = service::CLUSTER_IP.into();
        }
        carry_allocations(&stored.spec, &mut spec)?;
        if merged.spec != spec {
            merged.spec = spec;
            merged.metadata.generation += 1;
        }
        validation::validate_service(&merged)?;
        Ok(merged)
    }

    fn carry_from(stored: &Self, new: &mut Self) -> Result<(), Vec<FieldError>> {
        carry_allocations(&stored.spec, &mut new.spec)
    }
}

impl Resource for Node {
    kind_field!();

    fn validate(&self) -> Result<(), Vec<FieldError>> {
        validation::validate_node(self)
    }

    fn prepare_create(&mut self) {
        self.kind = "Node".into();
        self.metadata.namespace.clear();
        default_allocatable(self);
    }

    /// An admin's PUT changes labels (but `kubernetes.io/hostname`, always the node's name),
    /// annotations, cordon and taints; the rest of the status is the agent's, written through
    /// heartbeats and `/status`.
    fn merge_update(stored: &Self, new: Self) -> Result<Self, Vec<FieldError>> {
        let mut merged = stored.clone();
        merged.metadata = merged_meta(&stored.metadata, &new.metadata);
        merged.metadata.labels = with_own_hostname(&merged.metadata.name, std::mem::take(&mut merged.metadata.labels));
        merged.status.unschedulable = new.status.unschedulable;
        merged.status.taints = new.status.taints;
        validation::validate_node(&merged)?;
        Ok(merged)
    }
}

/// A node that reports only its capacity offers all of it.
pub fn default_allocatable(node: &mut Node) {
    if node.status.allocatable == Default::default() {
        node.status.allocatable = node.status.capacity;
    }
}

impl Resource for Event {
    kind_field!();

    fn validate(&self) -> Result<(), Vec<FieldError>> {
        validation::validate_event(self)
    }

    fn prepare_create(&mut self) {
        self.kind = "Event".into();
        self.count = self.count.max(1);
    }

    fn merge_update(stored: &Self, new: Self) -> Result<Self, Vec<FieldError>> {
        let merged = Event { kind: "Event".into(), metadata: merged_meta(&stored.metadata, &new.metadata), ..new };
        validation::validate_event(&merged)?;
        Ok(merged)
    }
}

impl Resource for Namespace {
    kind_field!();

    fn validate(&self) -> Result<(), Vec<FieldError>> {
        validation::validate_namespace(self)
    }

    fn prepare_create(&mut self) {
        self.kind = "Namespace".into();
        self.metadata.namespace.clear();
        self.status.phase = "Active".into();
    }

    fn merge_update(stored: &Self, new: Self) -> Result<Self, Vec<FieldError>> {
        let mut merged = stored.clone();
        merged.metadata = merged_meta(&stored.metadata, &new.metadata);
        validation::validate_namespace(&merged)?;
        Ok(merged)
    }
}

/// Leases are written only by registration and renewal (`ops::renew_lease`), which set the
/// whole spec, and by the control plane (leader election, identities); an update keeps the
/// spec and takes only labels and annotations.
impl Resource for Lease {
    kind_field!();

    fn validate(&self) -> Result<(), Vec<FieldError>> {
        validation::validate_lease(self)
    }

    /// The namespace stays: a node's lease has none, the control plane's are in `kube-system`.
    fn prepare_create(&mut self) {
        self.kind = "Lease".into();
    }

    fn merge_update(stored: &Self, new: Self) -> Result<Self, Vec<FieldError>> {
        let mut merged = stored.clone();
        merged.metadata = merged_meta(&stored.metadata, &new.metadata);
        validation::validate_lease(&merged)?;
        Ok(merged)
    }
}

/// What Kubernetes answers when an immutable ConfigMap's or Secret's data would change.
const IMMUTABLE_DATA: &str = "field is immutable when `immutable` is set";

/// The errors of an update of an object whose `immutable` is set: its data may not change,
/// nor may `immutable` be unset.
fn immutable_errors(stored_immutable: bool, new_immutable: bool, changed: &[(&str, bool)]) -> Vec<FieldError> {
    if !stored_immutable {
        return Vec::new();
    }
    let mut errors: Vec<FieldError> = changed
        .iter()
        .filter(|(_, changed)| *changed)
        .map(|(field, _)| FieldError { field: field.to_string(), message: IMMUTABLE_DATA.into(), ..Default::default() })
        .collect();
    if !new_immutable {
        errors.push(FieldError { field: "immutable".into(), message: IMMUTABLE_DATA.into(), ..Default::default() });
    }
    errors
}

impl Resource for ConfigMap {
    kind_field!();

    fn validate(&self) -> Result<(), Vec<FieldError>> {
        validation::validate_config_map(self)
    }

    fn prepare_create(&mut self) {
        self.kind = "ConfigMap".into();
    }

    fn merge_update(stored: &Self, new: Self) -> Result<Self, Vec<FieldError>> {
        let errors = immutable_errors(
            stored.immutable,
            new.immutable,
            &[("data", new.data != stored.data), ("binary_data", new.binary_data != stored.binary_data)],
        );
        if !errors.is_empty() {
            return Err(errors);
        }
        let merged = ConfigMap { metadata: merged_meta(&stored.metadata, &new.metadata), kind: stored.kind.clone(), ..new };
        validation::validate_config_map(&merged)?;
        Ok(merged)
    }
}

/// `string_data` is merged into `data` on every write, as kube-apiserver does, so that
/// what is stored (and read back) holds `data` alone.
impl Resource for Secret {
    kind_field!();

    fn validate(&self) -> Result<(), Vec<FieldError>> {
        validation::validate_secret(self)
    }

    fn prepare_create(&mut self) {
        self.kind = "Secret".into();
        self.merge_string_data();
    }

    fn merge_update(stored: &Self, mut new: Self) -> Result<Self, Vec<FieldError>> {
        new.merge_string_data();
        let mut errors = immutable_errors(stored.immutable, new.immutable, &[("data", new.data != stored.data)]);
        if new.type_ != stored.type_ {
            errors.push(FieldError {
                field: "type".into(),
                message: format!("field is immutable (it is {})", stored.type_),
                ..Default::default()
            });
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let merged = Secret { metadata: merged_meta(&stored.metadata, &new.metadata), kind: stored.kind.clone(), ..new };
        validation::validate_secret(&merged)?;
        Ok(merged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example pod with the defaults its create stores.
    fn pod() -> Pod {
        let mut pod: Pod = serde_json::from_str(include_str!("../../examples/pod.json")).unwrap();
        pod.spec.set_defaults();
        pod
    }

    #[test]
    fn a_new_pod_is_pending_with_identity_and_no_node() {
        let mut p = pod();
        p.status.phase = shared::model::PodPhase::Running;
        stamp_new(&mut p, chrono::Utc::now());
        assert_eq!(p.status.phase, shared::model::PodPhase::Pending);
        assert!(!p.metadata.uid.is_empty());
        assert!(p.metadata.created_at.is_some());
        assert!(p.spec.node_name.is_empty());
    }

    #[test]
    fn a_create_drops_and_a_put_keeps_the_deletion_marks() {
        let now = chrono::Utc::now();
        let mut sent = pod();
        sent.metadata.deletion_timestamp = Some(now);
        sent.metadata.deletion_grace_period_seconds = Some(5);
        stamp_new(&mut sent, now);
        assert_eq!((sent.metadata.deletion_timestamp, sent.metadata.deletion_grace_period_seconds), (None, None));

        let mut terminating = pod();
        terminating.metadata.deletion_timestamp = Some(now);
        terminating.metadata.deletion_grace_period_seconds = Some(30);
        let mut put = pod();
        put.metadata.labels.insert("extra".into(), "yes".into());
        let merged = Pod::merge_update(&terminating, put.clone()).unwrap();
        assert_eq!((merged.metadata.deletion_timestamp, merged.metadata.deletion_grace_period_seconds), (Some(now), Some(30)));
        put.metadata.deletion_grace_period_seconds = Some(1);
        let merged = Pod::merge_update(&pod(), put).unwrap();
        assert_eq!(merged.metadata.deletion_grace_period_seconds, None, "a PUT cannot start a deletion either");
    }

    #[test]
    fn a_pod_update_keeps_status_and_node_and_rejects_spec_changes() {
        let mut stored = pod();
        stored.spec.node_name = "node-1".into();
        stored.status.phase = shared::model::PodPhase::Running;
        let mut new = pod();
        new.metadata.labels.insert("extra".into(), "yes".into());
        let merged = Pod::merge_update(&stored, new.clone()).unwrap();
        assert_eq!(merged.spec.node_name, "node-1");
        assert_eq!(merged.status.phase, shared::model::PodPhase::Running);
        assert_eq!(merged.metadata.labels["extra"], "yes");
        new.spec.containers[0].image = "minimal:2".into();
        assert_eq!(Pod::merge_update(&stored, new).unwrap_err()[0].field, "spec", "no container restarts for a new image");

        let mut changed = pod();
        changed.spec.containers[0].command.clear();
        let errors = Pod::merge_update(&stored, changed).unwrap_err();
        assert_eq!(errors[0].field, "spec");
    }

    #[test]
    fn a_node_put_changes_cordon_and_labels_only() {
        let mut stored = Node { kind: "Node".into(), metadata: ObjectMeta::named("", "n1"), ..Node::default() };
        stored.status.capacity.cpu = 4000;
        let mut new = stored.clone();
        new.status.capacity.cpu = 1;
        new.status.unschedulable = true;
        let merged = Node::merge_update(&stored, new).unwrap();
        assert!(merged.status.unschedulable);
        assert_eq!(merged.status.capacity.cpu, 4000);
    }
}
