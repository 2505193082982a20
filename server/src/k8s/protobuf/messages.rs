//! The messages Shepherd reads from protobuf bodies: each one's field numbers, JSON names and
//! shapes, as Kubernetes' `generated.proto` files number them (v1.32, and the fields later
//! versions added, which JSON bodies may carry too).

use Shape::{Bool, BytesMap, Int, IntOrString, Message, QuantityMap, ServerSet, Text, TextMap, Unread};

/// How a field's value reads into JSON.
#[derive(Clone, Copy)]
pub(super) enum Shape {
    Text,
    Int,
    Bool,
    Message(&'static Schema),
    /// `map<string, string>`.
    TextMap,
    /// `map<string, bytes>`.
    BytesMap,
    /// `map<string, Quantity>`: each a string.
    QuantityMap,
    /// `IntOrString`: a number or a string.
    IntOrString,
    /// Set by the server (uid, timestamps, managedFields): left out, as a JSON body's are.
    ServerSet,
    /// A Kubernetes field whose message this reader has no table for: refused unless empty.
    Unread,
}

pub(super) struct Field {
    pub(super) number: u64,
    pub(super) name: &'static str,
    pub(super) shape: Shape,
    pub(super) repeated: bool,
    /// A pointer in Go: its zero is sent only when set, and means what it says (`replicas: 0`).
    pub(super) zero_counts: bool,
}

const fn one(number: u64, name: &'static str, shape: Shape) -> Field {
    Field { number, name, shape, repeated: false, zero_counts: false }
}

const fn many(number: u64, name: &'static str, shape: Shape) -> Field {
    Field { number, name, shape, repeated: true, zero_counts: false }
}

const fn pointer(number: u64, name: &'static str, shape: Shape) -> Field {
    Field { number, name, shape, repeated: false, zero_counts: true }
}

pub(super) struct Schema {
    pub(super) name: &'static str,
    pub(super) fields: &'static [Field],
}

static OBJECT_META: Schema = Schema {
    name: "ObjectMeta",
    fields: &[
        one(1, "name", Text),
        one(2, "generateName", Text),
        one(3, "namespace", Text),
        one(4, "selfLink", ServerSet),
        one(5, "uid", ServerSet),
        one(6, "resourceVersion", Text),
        one(7, "generation", ServerSet),
        one(8, "creationTimestamp", ServerSet),
        one(9, "deletionTimestamp", ServerSet),
        one(10, "deletionGracePeriodSeconds", ServerSet),
        one(11, "labels", TextMap),
        one(12, "annotations", TextMap),
        many(13, "ownerReferences", Unread),
        many(14, "finalizers", Text),
        many(17, "managedFields", ServerSet),
    ],
};
static LABEL_SELECTOR_REQUIREMENT: Schema =
    Schema { name: "LabelSelectorRequirement", fields: &[one(1, "key", Text), one(2, "operator", Text), many(3, "values", Text)] };
static LABEL_SELECTOR: Schema = Schema {
    name: "LabelSelector",
    fields: &[one(1, "matchLabels", TextMap), many(2, "matchExpressions", Message(&LABEL_SELECTOR_REQUIREMENT))],
};
static RESOURCES: Schema = Schema {
    name: "ResourceRequirements",
    fields: &[one(1, "limits", QuantityMap), one(2, "requests", QuantityMap), many(3, "claims", Unread)],
};
static CONTAINER_PORT: Schema = Schema {
    name: "ContainerPort",
    fields: &[
        one(1, "name", Text),
        one(2, "hostPort", Int),
        one(3, "containerPort", Int),
        one(4, "protocol", Text),
        one(5, "hostIP", Text),
    ],
};
static ENV_VAR: Schema = Schema { name: "EnvVar", fields: &[one(1, "name", Text), one(2, "value", Text), one(3, "valueFrom", Unread)] };
static CONTAINER: Schema = Schema {
    name: "Container",
    fields: &[
        one(1, "name", Text),
        one(2, "image", Text),
        many(3, "command", Text),
        many(4, "args", Text),
        one(5, "workingDir", Text),
        many(6, "ports", Message(&CONTAINER_PORT)),
        many(7, "env", Message(&ENV_VAR)),
        one(8, "resources", Message(&RESOURCES)),
        many(9, "volumeMounts", Unread),
        one(10, "livenessProbe", Unread),
        one(11, "readinessProbe", Unread),
        one(12, "lifecycle", Unread),
        one(13, "terminationMessagePath", Text),
        one(14, "imagePullPolicy", Text),
        one(15, "securityContext", Unread),
        one(16, "stdin", Bool),
        one(17, "stdinOnce", Bool),
        one(18, "tty", Bool),
        many(19, "envFrom", Unread),
        one(20, "terminationMessagePolicy", Text),
        many(21, "volumeDevices", Unread),
        one(22, "startupProbe", Unread),
        many(23, "resizePolicy", Unread),
        one(24, "restartPolicy", Text),
        many(25, "restartPolicyRules", Unread),
    ],
};
static POD_SPEC: Schema = Schema {
    name: "PodSpec",
    fields: &[
        many(1, "volumes", Unread),
        many(2, "containers", Message(&CONTAINER)),
        one(3, "restartPolicy", Text),
        pointer(4, "terminationGracePeriodSeconds", Int),
        pointer(5, "activeDeadlineSeconds", Int),
        one(6, "dnsPolicy", Text),
        one(7, "nodeSelector", TextMap),
        one(8, "serviceAccountName", Text),
        one(9, "serviceAccount", Text),
        one(10, "nodeName", Text),
        one(11, "hostNetwork", Bool),
        one(12, "hostPID", Bool),
        one(13, "hostIPC", Bool),
        one(14, "securityContext", Unread),
        many(15, "imagePullSecrets", Unread),
        one(16, "hostname", Text),
        one(17, "subdomain", Text),
        one(18, "affinity", Unread),
        one(19, "schedulerName", Text),
        many(20, "initContainers", Message(&CONTAINER)),
        pointer(21, "automountServiceAccountToken", Bool),
        many(22, "tolerations", Unread),
        many(23, "hostAliases", Unread),
        one(24, "priorityClassName", Text),
        pointer(25, "priority", Int),
        one(26, "dnsConfig", Unread),
        pointer(27, "shareProcessNamespace", Bool),
        many(28, "readinessGates", Unread),
        one(29, "runtimeClassName", Text),
        pointer(30, "enableServiceLinks", Bool),
        one(31, "preemptionPolicy", Text),
        one(32, "overhead", QuantityMap),
        many(33, "topologySpreadConstraints", Unread),
        many(34, "ephemeralContainers", Unread),
        pointer(35, "setHostnameAsFQDN", Bool),
        one(36, "os", Unread),
        pointer(37, "hostUsers", Bool),
        many(38, "schedulingGates", Unread),
        many(39, "resourceClaims", Unread),
        one(40, "resources", Message(&RESOURCES)),
        one(41, "hostnameOverride", Text),
        one(42, "workloadRef", Unread),
    ],
};
static POD_TEMPLATE: Schema =
    Schema { name: "PodTemplateSpec", fields: &[one(1, "metadata", Message(&OBJECT_META)), one(2, "spec", Message(&POD_SPEC))] };
static POD: Schema = Schema {
    name: "Pod",
    fields: &[one(1, "metadata", Message(&OBJECT_META)), one(2, "spec", Message(&POD_SPEC)), one(3, "status", Unread)],
};
static ROLLING_UPDATE: Schema =
    Schema { name: "RollingUpdateDeployment", fields: &[one(1, "maxUnavailable", IntOrString), one(2, "maxSurge", IntOrString)] };
static STRATEGY: Schema =
    Schema { name: "DeploymentStrategy", fields: &[one(1, "type", Text), one(2, "rollingUpdate", Message(&ROLLING_UPDATE))] };
static DEPLOYMENT_SPEC: Schema = Schema {
    name: "DeploymentSpec",
    fields: &[
        pointer(1, "replicas", Int),
        one(2, "selector", Message(&LABEL_SELECTOR)),
        one(3, "template", Message(&POD_TEMPLATE)),
        one(4, "strategy", Message(&STRATEGY)),
        one(5, "minReadySeconds", Int),
        pointer(6, "revisionHistoryLimit", Int),
        one(7, "paused", Bool),
        pointer(9, "progressDeadlineSeconds", Int),
    ],
};
static DEPLOYMENT: Schema = Schema {
    name: "Deployment",
    fields: &[one(1, "metadata", Message(&OBJECT_META)), one(2, "spec", Message(&DEPLOYMENT_SPEC)), one(3, "status", Unread)],
};
static REPLICA_SET_SPEC: Schema = Schema {
    name: "ReplicaSetSpec",
    fields: &[
        pointer(1, "replicas", Int),
        one(2, "selector", Message(&LABEL_SELECTOR)),
        one(3, "template", Message(&POD_TEMPLATE)),
        one(4, "minReadySeconds", Int),
    ],
};
static REPLICA_SET: Schema = Schema {
    name: "ReplicaSet",
    fields: &[one(1, "metadata", Message(&OBJECT_META)), one(2, "spec", Message(&REPLICA_SET_SPEC)), one(3, "status", Unread)],
};
static SERVICE_PORT: Schema = Schema {
    name: "ServicePort",
    fields: &[
        one(1, "name", Text),
        one(2, "protocol", Text),
        one(3, "port", Int),
        one(4, "targetPort", IntOrString),
        one(5, "nodePort", Int),
        one(6, "appProtocol", Text),
    ],
};
static SERVICE_SPEC: Schema = Schema {
    name: "ServiceSpec",
    fields: &[
        many(1, "ports", Message(&SERVICE_PORT)),
        one(2, "selector", TextMap),
        one(3, "clusterIP", Text),
        one(4, "type", Text),
        many(5, "externalIPs", Text),
        one(7, "sessionAffinity", Text),
        one(8, "loadBalancerIP", Text),
        many(9, "loadBalancerSourceRanges", Text),
        one(10, "externalName", Text),
        one(11, "externalTrafficPolicy", Text),
        one(12, "healthCheckNodePort", Int),
        one(13, "publishNotReadyAddresses", Bool),
        one(14, "sessionAffinityConfig", Unread),
        one(17, "ipFamilyPolicy", Text),
        many(18, "clusterIPs", Text),
        many(19, "ipFamilies", Text),
        pointer(20, "allocateLoadBalancerNodePorts", Bool),
        one(21, "loadBalancerClass", Text),
        one(22, "internalTrafficPolicy", Text),
        one(23, "trafficDistribution", Text),
    ],
};
static SERVICE: Schema = Schema {
    name: "Service",
    fields: &[one(1, "metadata", Message(&OBJECT_META)), one(2, "spec", Message(&SERVICE_SPEC)), one(3, "status", Unread)],
};
static NAMESPACE_SPEC: Schema = Schema { name: "NamespaceSpec", fields: &[many(1, "finalizers", Text)] };
static NAMESPACE: Schema = Schema {
    name: "Namespace",
    fields: &[one(1, "metadata", Message(&OBJECT_META)), one(2, "spec", Message(&NAMESPACE_SPEC)), one(3, "status", Unread)],
};
static CONFIG_MAP: Schema = Schema {
    name: "ConfigMap",
    fields: &[
        one(1, "metadata", Message(&OBJECT_META)),
        one(2, "data", TextMap),
        one(3, "binaryData", BytesMap),
        pointer(4, "immutable", Bool),
    ],
};
static SECRET: Schema = Schema {
    name: "Secret",
    fields: &[
        one(1, "metadata", Message(&OBJECT_META)),
        one(2, "data", BytesMap),
        one(3, "type", Text),
        one(4, "stringData", TextMap),
        pointer(5, "immutable", Bool),
    ],
};
static PRECONDITIONS: Schema = Schema { name: "Preconditions", fields: &[one(1, "uid", Text), one(2, "resourceVersion", Text)] };
pub(super) static DELETE_OPTIONS: Schema = Schema {
    name: "DeleteOptions",
    fields: &[
        pointer(1, "gracePeriodSeconds", Int),
        one(2, "preconditions", Message(&PRECONDITIONS)),
        pointer(3, "orphanDependents", Bool),
        one(4, "propagationPolicy", Text),
        many(5, "dryRun", Text),
        pointer(6, "ignoreStoreReadErrorWithClusterBreakingPotential", Bool),
    ],
};

static RESOURCE_ATTRIBUTES: Schema = Schema {
    name: "ResourceAttributes",
    fields: &[
        one(1, "namespace", Text),
        one(2, "verb", Text),
        one(3, "group", Text),
        one(4, "version", Text),
        one(5, "resource", Text),
        one(6, "subresource", Text),
        one(7, "name", Text),
        one(8, "fieldSelector", Unread),
        one(9, "labelSelector", Unread),
    ],
};
static NON_RESOURCE_ATTRIBUTES: Schema = Schema { name: "NonResourceAttributes", fields: &[one(1, "path", Text), one(2, "verb", Text)] };
static ACCESS_REVIEW_SPEC: Schema = Schema {
    name: "SelfSubjectAccessReviewSpec",
    fields: &[
        one(1, "resourceAttributes", Message(&RESOURCE_ATTRIBUTES)),
        one(2, "nonResourceAttributes", Message(&NON_RESOURCE_ATTRIBUTES)),
    ],
};
static RULES_REVIEW_SPEC: Schema = Schema { name: "SelfSubjectRulesReviewSpec", fields: &[one(1, "namespace", Text)] };
/// What `kubectl auth can-i` sends; the server writes the status.
static ACCESS_REVIEW: Schema = Schema {
    name: "SelfSubjectAccessReview",
    fields: &[one(1, "metadata", Message(&OBJECT_META)), one(2, "spec", Message(&ACCESS_REVIEW_SPEC)), one(3, "status", ServerSet)],
};
/// What `kubectl auth can-i --list` sends.
static RULES_REVIEW: Schema = Schema {
    name: "SelfSubjectRulesReview",
    fields: &[one(1, "metadata", Message(&OBJECT_META)), one(2, "spec", Message(&RULES_REVIEW_SPEC)), one(3, "status", ServerSet)],
};

/// The kinds whose whole object this reader takes, by the envelope's kind.
pub(super) fn schema_of(kind: &str) -> Option<&'static Schema> {
    [&POD, &DEPLOYMENT, &REPLICA_SET, &SERVICE, &NAMESPACE, &CONFIG_MAP, &SECRET].into_iter().find(|s| s.name == kind)
}

/// The schema of an access review `kubectl auth can-i` sends.
pub(super) fn review_schema_of(kind: &str) -> Option<&'static Schema> {
    [&ACCESS_REVIEW, &RULES_REVIEW].into_iter().find(|s| s.name == kind)
}
