//! The pieces every group's kinds share: times, optional fields, `ObjectMeta` and
//! `LabelSelector`, both ways.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use shared::model::{Labels, ManagedFieldsEntry, ObjectMeta, OwnerReference, Time};
use shared::selector::{LabelSelector, Operator, Requirement};

use super::strict::Cause;
use crate::k8s::kinds::api_version_of;

pub(super) fn time(t: Time) -> meta::Time {
    let nanos = i128::from(t.timestamp()) * 1_000_000_000 + i128::from(t.timestamp_subsec_nanos());
    meta::Time(k8s_openapi::jiff::Timestamp::from_nanosecond(nanos).unwrap_or_default())
}

pub(super) fn time_in(t: meta::Time) -> Option<Time> {
    chrono::DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().max(0) as u32)
}

pub(super) fn some(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

pub(super) fn map(labels: &Labels) -> Option<BTreeMap<String, String>> {
    (!labels.is_empty()).then(|| labels.clone())
}

pub(super) fn list<T>(items: Vec<T>) -> Option<Vec<T>> {
    (!items.is_empty()).then_some(items)
}

/// A condition as one of Kubernetes' condition types (`PodCondition`, `NodeCondition`,
/// `DeploymentCondition`), which share these fields; each type's own fields follow.
macro_rules! kubernetes_condition {
    ($kind:path, $c:expr $(, $field:ident: $value:expr)* $(, ..$rest:expr)?) => {{
        let c: &shared::model::Condition = $c;
        $kind {
            type_: c.type_.clone(),
            status: c.status.clone(),
            reason: super::meta::some(&c.reason),
            message: super::meta::some(&c.message),
            last_transition_time: c.last_transition_time.map(super::meta::time),
            $($field: $value,)*
            $(..$rest)?
        }
    }};
}
pub(super) use kubernetes_condition;

pub(super) fn meta_out(m: &ObjectMeta) -> meta::ObjectMeta {
    meta::ObjectMeta {
        name: some(&m.name),
        namespace: some(&m.namespace),
        uid: some(&m.uid),
        labels: map(&m.labels),
        annotations: map(&m.annotations),
        resource_version: (m.resource_version > 0).then(|| m.resource_version.to_string()),
        generation: (m.generation > 0).then(|| i64::try_from(m.generation).unwrap_or(i64::MAX)),
        creation_timestamp: m.created_at.map(time),
        deletion_timestamp: m.deletion_timestamp.map(time),
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        owner_references: list(
            m.owner_references
                .iter()
                .map(|r| meta::OwnerReference {
                    api_version: api_version_of(&r.kind).into(),
                    kind: r.kind.clone(),
                    name: r.name.clone(),
                    uid: r.uid.clone(),
                    controller: r.controller.then_some(true),
                    block_owner_deletion: r.block_owner_deletion.then_some(true),
                })
                .collect(),
        ),
        managed_fields: list(m.managed_fields.iter().map(managed_fields_entry).collect()),
        ..Default::default()
    }
}

fn managed_fields_entry(e: &ManagedFieldsEntry) -> meta::ManagedFieldsEntry {
    meta::ManagedFieldsEntry {
        manager: some(&e.manager),
        operation: Some(e.operation.as_str().into()),
        api_version: some(&e.api_version),
        time: e.time.map(time),
        fields_type: Some("FieldsV1".into()),
        fields_v1: Some(meta::FieldsV1(e.fields_v1.clone())),
        subresource: some(&e.subresource),
    }
}

pub(super) fn meta_in(m: meta::ObjectMeta, errors: &mut Vec<Cause>) -> ObjectMeta {
    let resource_version = match m.resource_version.as_deref() {
        None | Some("") => 0,
        Some(text) => text.parse().unwrap_or_else(|_| {
            errors.push(Cause::invalid("metadata.resourceVersion", format!("{text:?} is not a resourceVersion this server issued")));
            0
        }),
    };
    ObjectMeta {
        name: m.name.unwrap_or_default(),
        namespace: m.namespace.unwrap_or_default(),
        labels: m.labels.unwrap_or_default(),
        annotations: m.annotations.unwrap_or_default(),
        resource_version,
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        owner_references: m
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .map(|r| OwnerReference {
                kind: r.kind,
                name: r.name,
                uid: r.uid,
                controller: r.controller.unwrap_or(false),
                block_owner_deletion: r.block_owner_deletion.unwrap_or(false),
            })
            .collect(),
        ..Default::default()
    }
}

pub(super) fn selector_out(s: &LabelSelector) -> meta::LabelSelector {
    meta::LabelSelector {
        match_labels: map(&s.match_labels),
        match_expressions: list(
            s.match_expressions
                .iter()
                .map(|r| meta::LabelSelectorRequirement {
                    key: r.key.clone(),
                    operator: format!("{:?}", r.operator),
                    values: list(r.values.clone()),
                })
                .collect(),
        ),
    }
}

pub(super) fn selector_in(s: meta::LabelSelector, errors: &mut Vec<Cause>) -> LabelSelector {
    let mut expressions = Vec::new();
    for (i, r) in s.match_expressions.unwrap_or_default().into_iter().enumerate() {
        let operator = match r.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            other => {
                errors.push(Cause::invalid(
                    format!("spec.selector.matchExpressions[{i}].operator"),
                    format!("unknown operator {other:?}: use In, NotIn, Exists or DoesNotExist"),
                ));
                continue;
            }
        };
        expressions.push(Requirement { key: r.key, operator, values: r.values.unwrap_or_default() });
    }
    LabelSelector { match_labels: s.match_labels.unwrap_or_default(), match_expressions: expressions }
}
