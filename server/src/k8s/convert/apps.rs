//! The apps group's kinds (`apps/v1`): Deployment, and the `autoscaling/v1` Scale its
//! `scale` subresource reads and writes.

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::autoscaling::v1 as autoscaling;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::Value;
use shared::model::{Deployment, DeploymentSpec, DeploymentStatus, PodTemplateSpec, Scale, ScaleSpec, ScaleStatus};

use super::core::{pod_spec_in, pod_spec_out};
use super::meta::{kubernetes_condition, list, meta_in, meta_out, selector_in, selector_out, some, time};
use super::strict::{Cause, Convert, Error, Result, unkept};

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
                template: core::PodTemplateSpec {
                    metadata: Some(meta_out(&self.spec.template.metadata)),
                    spec: Some(pod_spec_out(&self.spec.template.spec)),
                },
                ..Default::default()
            }),
            status: Some(apps::DeploymentStatus {
                replicas: count(s.replicas),
                ready_replicas: count(s.ready_replicas),
                available_replicas: count(s.available_replicas),
                unavailable_replicas: count((self.spec.replicas - s.available_replicas).max(0)),
                observed_generation: (s.observed_generation > 0).then(|| i64::try_from(s.observed_generation).unwrap_or(i64::MAX)),
                conditions: list(
                    s.conditions
                        .iter()
                        .map(|c| kubernetes_condition!(apps::DeploymentCondition, c, last_update_time: c.last_transition_time.map(time)))
                        .collect(),
                ),
                ..Default::default()
            }),
        }
    }

    fn from_k8s(d: apps::Deployment, errors: &mut Vec<Cause>) -> Deployment {
        let metadata = meta_in(d.metadata, errors);
        let spec = d.spec.unwrap_or_default();
        let template_meta = meta_in(spec.template.metadata.unwrap_or_default(), errors);
        let template_spec = pod_spec_in(spec.template.spec.unwrap_or_default(), "spec.template.spec", errors);
        let spec = DeploymentSpec {
            // Kubernetes' default when a manifest leaves it out.
            replicas: spec.replicas.unwrap_or(1),
            selector: selector_in(spec.selector, errors),
            template: PodTemplateSpec { metadata: template_meta, spec: template_spec },
        };
        Deployment { kind: "Deployment".into(), metadata, spec, status: DeploymentStatus::default() }
    }
}

pub fn scale_out(d: &Deployment) -> autoscaling::Scale {
    let m = &d.metadata;
    autoscaling::Scale {
        metadata: meta::ObjectMeta {
            name: some(&m.name),
            namespace: some(&m.namespace),
            uid: some(&m.uid),
            resource_version: Some(m.resource_version.to_string()),
            creation_timestamp: m.created_at.map(time),
            ..Default::default()
        },
        spec: Some(autoscaling::ScaleSpec { replicas: Some(d.spec.replicas) }),
        status: Some(autoscaling::ScaleStatus { replicas: d.status.replicas, selector: Some(d.spec.selector.to_string()) }),
    }
}

/// Reads an `autoscaling/v1` Scale body into the native one, refusing the fields a Scale
/// does not have, as [`decode`] refuses them for whole objects.
pub fn scale_in(value: &Value) -> Result<Scale> {
    let s: autoscaling::Scale = serde_path_to_error::deserialize(value)
        .map_err(|e| Error::Malformed { kind: "Scale", message: format!("{}: {}", e.path(), e.inner()) })?;
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
