//! The apps group's kinds (`apps/v1`): Deployment and ReplicaSet, and the `autoscaling/v1`
//! Scale their `scale` subresources read and write.

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::autoscaling::v1 as autoscaling;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString as K8sIntOrString;
use serde_json::Value;
use shared::model::{
    Deployment, DeploymentSpec, DeploymentStatus, DeploymentStrategy, IntOrString, PodTemplateSpec, ReplicaSet, ReplicaSetSpec,
    ReplicaSetStatus, RollingUpdateDeployment, Scale, ScaleSpec, ScaleStatus,
};

use super::core::{pod_spec_in, pod_spec_out};
use super::meta::{kubernetes_condition, list, meta_in, meta_out, selector_in, selector_out, some, time};
use super::strict::{Cause, Convert, Error, Result, unkept};
use crate::resources::Scalable;

impl Convert for Deployment {
    type K8s = apps::Deployment;

    fn to_k8s(&self) -> apps::Deployment {
        let s = &self.status;
        let count = |n: i32| (n != 0).then_some(n);
        apps::Deployment {
            metadata: meta_out(&self.metadata),
            spec: Some(apps::DeploymentSpec {
                replicas: Some(self.spec.replicas),
                selector: selector_out(&self.spec.selector),
                template: template_out(&self.spec.template),
                strategy: Some(strategy_out(&self.spec.strategy)),
                min_ready_seconds: count(self.spec.min_ready_seconds),
                revision_history_limit: self.spec.revision_history_limit,
                progress_deadline_seconds: self.spec.progress_deadline_seconds,
                paused: self.spec.paused.then_some(true),
            }),
            status: Some(apps::DeploymentStatus {
                replicas: count(s.replicas),
                updated_replicas: count(s.updated_replicas),
                ready_replicas: count(s.ready_replicas),
                available_replicas: count(s.available_replicas),
                unavailable_replicas: count(s.unavailable_replicas),
                observed_generation: generation_out(s.observed_generation),
                collision_count: s.collision_count,
                conditions: list(
                    s.conditions
                        .iter()
                        .map(|c| {
                            let updated = c.last_update_time.or(c.last_transition_time);
                            kubernetes_condition!(apps::DeploymentCondition, c, last_update_time: updated.map(time))
                        })
                        .collect(),
                ),
            }),
        }
    }

    fn from_k8s(d: apps::Deployment, errors: &mut Vec<Cause>) -> Deployment {
        let metadata = meta_in(d.metadata, errors);
        let spec = d.spec.unwrap_or_default();
        let template_meta = meta_in(spec.template.metadata.unwrap_or_default(), errors);
        let template_spec = pod_spec_in(spec.template.spec.unwrap_or_default(), "spec.template.spec", errors);
        let strategy = spec.strategy.unwrap_or_default();
        let spec = DeploymentSpec {
            // Kubernetes' default when a manifest leaves it out.
            replicas: spec.replicas.unwrap_or(1),
            selector: selector_in(spec.selector, errors),
            template: PodTemplateSpec { metadata: template_meta, spec: template_spec },
            strategy: DeploymentStrategy {
                type_: strategy.type_.unwrap_or_default(),
                rolling_update: strategy.rolling_update.map(|r| RollingUpdateDeployment {
                    max_surge: r.max_surge.map(int_or_string_in),
                    max_unavailable: r.max_unavailable.map(int_or_string_in),
                }),
            },
            min_ready_seconds: spec.min_ready_seconds.unwrap_or(0),
            revision_history_limit: spec.revision_history_limit,
            progress_deadline_seconds: spec.progress_deadline_seconds,
            paused: spec.paused.unwrap_or(false),
        };
        Deployment { kind: "Deployment".into(), metadata, spec, status: DeploymentStatus::default() }
    }
}

impl Convert for ReplicaSet {
    type K8s = apps::ReplicaSet;

    fn to_k8s(&self) -> apps::ReplicaSet {
        let s = &self.status;
        let count = |n: i32| (n != 0).then_some(n);
        apps::ReplicaSet {
            metadata: meta_out(&self.metadata),
            spec: Some(apps::ReplicaSetSpec {
                replicas: Some(self.spec.replicas),
                min_ready_seconds: count(self.spec.min_ready_seconds),
                selector: selector_out(&self.spec.selector),
                template: Some(template_out(&self.spec.template)),
            }),
            status: Some(apps::ReplicaSetStatus {
                replicas: s.replicas,
                fully_labeled_replicas: count(s.fully_labeled_replicas),
                ready_replicas: count(s.ready_replicas),
                available_replicas: count(s.available_replicas),
                observed_generation: generation_out(s.observed_generation),
                conditions: list(s.conditions.iter().map(|c| kubernetes_condition!(apps::ReplicaSetCondition, c)).collect()),
            }),
        }
    }

    fn from_k8s(rs: apps::ReplicaSet, errors: &mut Vec<Cause>) -> ReplicaSet {
        let metadata = meta_in(rs.metadata, errors);
        let spec = rs.spec.unwrap_or_default();
        let template = spec.template.unwrap_or_default();
        let template_meta = meta_in(template.metadata.unwrap_or_default(), errors);
        let template_spec = pod_spec_in(template.spec.unwrap_or_default(), "spec.template.spec", errors);
        let spec = ReplicaSetSpec {
            // Kubernetes' default when a manifest leaves it out.
            replicas: spec.replicas.unwrap_or(1),
            min_ready_seconds: spec.min_ready_seconds.unwrap_or(0),
            selector: selector_in(spec.selector, errors),
            template: PodTemplateSpec { metadata: template_meta, spec: template_spec },
        };
        ReplicaSet { kind: "ReplicaSet".into(), metadata, spec, status: ReplicaSetStatus::default() }
    }
}

fn template_out(template: &PodTemplateSpec) -> core::PodTemplateSpec {
    core::PodTemplateSpec { metadata: Some(meta_out(&template.metadata)), spec: Some(pod_spec_out(&template.spec)) }
}

fn generation_out(generation: u64) -> Option<i64> {
    (generation > 0).then(|| i64::try_from(generation).unwrap_or(i64::MAX))
}

fn strategy_out(strategy: &DeploymentStrategy) -> apps::DeploymentStrategy {
    apps::DeploymentStrategy {
        type_: some(&strategy.type_),
        rolling_update: strategy.rolling_update.as_ref().map(|r| apps::RollingUpdateDeployment {
            max_surge: r.max_surge.clone().map(int_or_string_out),
            max_unavailable: r.max_unavailable.clone().map(int_or_string_out),
        }),
    }
}

fn int_or_string_in(value: K8sIntOrString) -> IntOrString {
    match value {
        K8sIntOrString::Int(n) => IntOrString::Int(n),
        K8sIntOrString::String(s) => IntOrString::String(s),
    }
}

fn int_or_string_out(value: IntOrString) -> K8sIntOrString {
    match value {
        IntOrString::Int(n) => K8sIntOrString::Int(n),
        IntOrString::String(s) => K8sIntOrString::String(s),
    }
}

pub fn scale_out<R: Scalable>(object: &R) -> autoscaling::Scale {
    let m = object.meta();
    autoscaling::Scale {
        metadata: meta::ObjectMeta {
            name: some(&m.name),
            namespace: some(&m.namespace),
            uid: some(&m.uid),
            resource_version: Some(m.resource_version.to_string()),
            creation_timestamp: m.created_at.map(time),
            ..Default::default()
        },
        spec: Some(autoscaling::ScaleSpec { replicas: Some(object.replicas()) }),
        status: Some(autoscaling::ScaleStatus { replicas: object.counted(), selector: Some(object.selector().to_string()) }),
    }
}

/// Reads an `autoscaling/v1` Scale body into the native one, refusing the fields a Scale
/// does not have, as [`decode`] refuses them for whole objects.
pub fn scale_in(value: &Value) -> Result<Scale> {
    let s: autoscaling::Scale = serde_path_to_error::deserialize(value).map_err(|e| Error::Malformed {
        kind: "Scale",
        message: format!("{}: {}", e.path(), shared::decode_error::without_values(&e.inner().to_string())),
    })?;
    let mut errors: Vec<Cause> = unkept(value, &serde_json::to_value(&s).unwrap_or(Value::Null)).into_iter().map(Cause::unknown).collect();
    let metadata = meta_in(s.metadata, &mut errors);
    let name = metadata.name.clone();
    let Some(replicas) = s.spec.and_then(|spec| spec.replicas) else {
        errors.push(Cause::invalid("spec.replicas", "a Scale must say how many replicas"));
        return Err(Error::Refused { kind: "Scale", name, causes: errors });
    };
    if !errors.is_empty() {
        return Err(Error::Refused { kind: "Scale", name, causes: errors });
    }
    Ok(Scale { kind: "Scale".into(), metadata, spec: ScaleSpec { replicas }, status: ScaleStatus::default() })
}
