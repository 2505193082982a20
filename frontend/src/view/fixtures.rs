//! Objects the view-model tests build: pods, nodes, events, a cached cluster and a decision.

use std::rc::Rc;

use chrono::{Duration, TimeZone, Utc};
use shared::model::{
    Container, Deployment, Event, Node, NodeResources, Object, ObjectMeta, ObjectReference, OwnerReference, Pod, PodPhase, ReplicaSet,
    ReplicaSetSpec, ResourceRequirements, Time, conditions,
};
use shared::registration::NodeDescription;
use shared::rollout::{POD_TEMPLATE_HASH_LABEL, REVISION_ANNOTATION, pod_template_hash};
use shared::scheduler::{Explanation, FilterVerdict, NodeExplanation, ScoreEntry, Verdict};
use yew::Reducible;

use crate::store::{Cluster, ClusterAction};

pub fn t0() -> Time {
    Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap()
}

pub fn ms(n: i64) -> Time {
    t0() + Duration::milliseconds(n)
}

pub fn pod(ns: &str, name: &str, node: &str, phase: PodPhase, cpu: i64) -> Pod {
    let mut pod = Pod { kind: "Pod".into(), metadata: ObjectMeta::named(ns, name), ..Default::default() };
    pod.metadata.created_at = Some(t0());
    pod.spec.node_name = node.into();
    pod.status.phase = phase;
    pod.spec.containers = vec![Container {
        name: "c".into(),
        image: "minimal".into(),
        resources: ResourceRequirements { cpu, memory: 1 << 20 },
        ..Default::default()
    }];
    pod
}

/// A deployment of `replicas` pods labelled `app: name` running `image`, as stored.
pub fn deployment(name: &str, replicas: i32, image: &str) -> Deployment {
    let mut d = Deployment { kind: "Deployment".into(), metadata: ObjectMeta::named("default", name), ..Default::default() };
    d.metadata.uid = format!("{name}-uid");
    d.spec.replicas = replicas;
    d.spec.selector.match_labels.insert("app".into(), name.into());
    d.spec.template.metadata.labels.insert("app".into(), name.into());
    d.spec.template.spec.containers = vec![Container { name: "c".into(), image: image.into(), ..Default::default() }];
    d
}

/// The ReplicaSet the deployment controller makes of `d`'s template: named and labelled by
/// the template's hash, controlled by `d`, at `revision`, sized `replicas` (all running).
pub fn replica_set_of(d: &Deployment, revision: u64, replicas: i32) -> ReplicaSet {
    let hash = pod_template_hash(&d.spec.template, None);
    let mut template = d.spec.template.clone();
    template.metadata.labels.insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
    let mut selector = d.spec.selector.clone();
    selector.match_labels.insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
    let mut rs = ReplicaSet {
        kind: "ReplicaSet".into(),
        metadata: ObjectMeta::named("default", &format!("{}-{hash}", d.metadata.name)),
        spec: ReplicaSetSpec { replicas, min_ready_seconds: 0, selector, template },
        ..Default::default()
    };
    rs.metadata.uid = format!("{}-uid", rs.metadata.name);
    rs.metadata.labels = rs.spec.template.metadata.labels.clone();
    rs.metadata.annotations.insert(REVISION_ANNOTATION.into(), revision.to_string());
    rs.metadata.owner_references = vec![owner_of_kind("Deployment", &d.metadata)];
    rs.status.replicas = replicas;
    rs.status.ready_replicas = replicas;
    rs
}

/// The controller reference to the object of `meta`.
pub fn owner_of_kind(kind: &str, meta: &ObjectMeta) -> OwnerReference {
    OwnerReference::controlled_by(kind, meta)
}

/// A node as its agent registers it at [`t0`]; not `ready`: its Ready condition turned False.
pub fn node(name: &str, ready: bool) -> Node {
    let mut node = NodeDescription::new(name, NodeResources { cpu: 1000, memory: 4 << 20, pods: 10 }).to_node(t0());
    if !ready {
        node.status.conditions[0].status = conditions::FALSE.into();
    }
    node
}

pub fn event(reason: &str, at: i64, pod: &str, source: &str) -> Rc<Event> {
    Rc::new(Event {
        kind: "Event".into(),
        metadata: ObjectMeta::named("default", &format!("{pod}.{reason}")),
        type_: "Normal".into(),
        reason: reason.into(),
        message: format!("{reason} {pod}"),
        involved_object: ObjectReference { kind: "Pod".into(), namespace: "default".into(), name: pod.into(), uid: String::new() },
        source: source.into(),
        count: 1,
        first_timestamp: Some(ms(at)),
        last_timestamp: Some(ms(at)),
    })
}

pub fn cluster(nodes: Vec<Node>, pods: Vec<Pod>) -> Rc<Cluster> {
    let state: Rc<Cluster> = Rc::default();
    let state = state.reduce(ClusterAction::Listed {
        kind: shared::model::Kind::Node,
        resource_version: 1,
        items: nodes.into_iter().map(Object::Node).collect(),
    });
    state.reduce(ClusterAction::Listed {
        kind: shared::model::Kind::Pod,
        resource_version: 1,
        items: pods.into_iter().map(Object::Pod).collect(),
    })
}

pub fn explanation() -> Explanation {
    let filter = |name: &str, verdict: Verdict, reason: &str| FilterVerdict {
        filter: name.into(),
        verdict,
        reason: reason.into(),
        detail: format!("{name} detail"),
    };
    let score = |plugin: &str, raw: u32, weight: u32| ScoreEntry {
        plugin: plugin.into(),
        raw,
        weight,
        weighted: (raw * weight) as u64,
        detail: String::new(),
    };
    Explanation {
        pod: "default/web".into(),
        profile: "spread".into(),
        total_nodes: 3,
        nodes_evaluated: 3,
        feasible_nodes: 2,
        nodes_to_find: 3,
        start_index: 0,
        selected: Some("n3".into()),
        message: "Successfully assigned default/web to n3".into(),
        nodes: vec![
            NodeExplanation {
                node: "n1".into(),
                feasible: false,
                filters: vec![
                    filter("NodeReady", Verdict::Passed, ""),
                    filter("NodeResourcesFit", Verdict::Failed, "Insufficient cpu, Insufficient memory"),
                    filter("PodCount", Verdict::Skipped, ""),
                ],
                scores: vec![],
                total: None,
                selected: false,
            },
            NodeExplanation {
                node: "n2".into(),
                feasible: true,
                filters: vec![
                    filter("NodeReady", Verdict::Passed, ""),
                    filter("NodeResourcesFit", Verdict::Passed, ""),
                    filter("PodCount", Verdict::Passed, ""),
                ],
                scores: vec![score("LeastAllocated", 40, 1), score("Spread", 50, 2)],
                total: Some(140),
                selected: false,
            },
            NodeExplanation {
                node: "n3".into(),
                feasible: true,
                filters: vec![
                    filter("NodeReady", Verdict::Passed, ""),
                    filter("NodeResourcesFit", Verdict::Passed, ""),
                    filter("PodCount", Verdict::Passed, ""),
                ],
                scores: vec![score("LeastAllocated", 90, 1), score("Spread", 100, 2)],
                total: Some(290),
                selected: true,
            },
        ],
        queue: None,
    }
}
