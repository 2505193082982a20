//! The rules of a rollout that more than one crate needs: the pod-template hash that names a
//! deployment's ReplicaSets, the labels and annotations a rollout writes, the strategy's
//! defaults, and how `maxSurge` and `maxUnavailable` resolve to pod counts, all as
//! Kubernetes has them (`pkg/controller/deployment/util`).

use crate::model::{Deployment, IntOrString, PodTemplateSpec, ReplicaSet};

/// The label that tells a deployment's ReplicaSets (and their pods) apart.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";
/// The revision of a deployment and of each of its ReplicaSets.
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
/// The deployment's `replicas` when it last sized this ReplicaSet.
pub const DESIRED_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/desired-replicas";
/// The deployment's `replicas + maxSurge` when it last sized this ReplicaSet.
pub const MAX_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/max-replicas";
/// The template annotation `kubectl rollout restart` sets.
pub const RESTARTED_AT_ANNOTATION: &str = "kubectl.kubernetes.io/restartedAt";

pub const ROLLING_UPDATE: &str = "RollingUpdate";
pub const RECREATE: &str = "Recreate";
/// `maxSurge` and `maxUnavailable` when a rolling update leaves them out.
pub const DEFAULT_MAX_SURGE: &str = "25%";
pub const DEFAULT_MAX_UNAVAILABLE: &str = "25%";
pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;
pub const DEFAULT_PROGRESS_DEADLINE_SECONDS: i32 = 600;

/// The deployment condition types and reasons, as Kubernetes writes them.
pub mod reasons {
    pub const PROGRESSING: &str = "Progressing";
    pub const AVAILABLE: &str = "Available";
    pub const REPLICA_FAILURE: &str = "ReplicaFailure";
    pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
    pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
    pub const RS_UPDATED: &str = "ReplicaSetUpdated";
    pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
    pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
    pub const PAUSED: &str = "DeploymentPaused";
    pub const RESUMED: &str = "DeploymentResumed";
    pub const MINIMUM_REPLICAS_AVAILABLE: &str = "MinimumReplicasAvailable";
    pub const MINIMUM_REPLICAS_UNAVAILABLE: &str = "MinimumReplicasUnavailable";
    pub const FAILED_CREATE: &str = "FailedCreate";
}

/// The alphabet Kubernetes renders generated names in: no vowels, no look-alikes.
pub const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// 32-bit FNV-1a.
fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u32 {
    bytes.into_iter().fold(0x811c_9dc5u32, |hash, b| (hash ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// The hash a deployment's ReplicaSet for `template` is named and labelled by: FNV-1a of the
/// template (its JSON, whose maps are ordered) and of the collision count, rendered as
/// Kubernetes renders it (the decimal digits, each mapped into [`SAFE_ALPHABET`]).
pub fn pod_template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let json = serde_json::to_vec(template).unwrap_or_default();
    let salt = collision_count.map(|n| (n as u32).to_le_bytes().into_iter().chain([0; 4])).into_iter().flatten();
    let hash = fnv1a(json.into_iter().chain(salt));
    hash.to_string().bytes().map(|b| SAFE_ALPHABET[b as usize % SAFE_ALPHABET.len()] as char).collect()
}

/// Whether two templates are the same but for the pod-template-hash label.
pub fn equal_ignoring_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    let strip = |t: &PodTemplateSpec| {
        let mut t = t.clone();
        t.metadata.labels.remove(POD_TEMPLATE_HASH_LABEL);
        t
    };
    strip(a) == strip(b)
}

/// A percentage (`"25%"`) as its number, or why it is none.
pub fn parse_percent(text: &str) -> Result<i32, String> {
    text.strip_suffix('%')
        .and_then(|n| n.parse::<i32>().ok())
        .ok_or_else(|| format!("{text:?} is neither a count nor a percentage such as \"25%\""))
}

/// A count, or a percentage of `total` rounded up or down.
pub fn resolve(value: &IntOrString, total: i32, round_up: bool) -> Result<i32, String> {
    match value {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(text) => {
            let percent = i64::from(parse_percent(text)?);
            let scaled = percent * i64::from(total);
            let n = if round_up { (scaled + 99).div_euclid(100) } else { scaled.div_euclid(100) };
            Ok(n.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32)
        }
    }
}

/// `(maxSurge, maxUnavailable)` of a rolling update of `desired` replicas: surge rounded up,
/// unavailable down, and when both come to 0, one pod may be unavailable (or nothing could
/// move).
pub fn resolve_fenceposts(max_surge: &IntOrString, max_unavailable: &IntOrString, desired: i32) -> (i32, i32) {
    let surge = resolve(max_surge, desired, true).unwrap_or(0);
    let unavailable = resolve(max_unavailable, desired, false).unwrap_or(0);
    if surge == 0 && unavailable == 0 { (0, 1) } else { (surge, unavailable) }
}

impl Deployment {
    pub fn is_recreate(&self) -> bool {
        self.spec.strategy.type_ == RECREATE
    }

    /// The rolling update's `(maxSurge, maxUnavailable)` as given, defaults filled in.
    fn rolling_parameters(&self) -> (IntOrString, IntOrString) {
        let rolling = self.spec.strategy.rolling_update.clone().unwrap_or_default();
        (
            rolling.max_surge.unwrap_or_else(|| IntOrString::String(DEFAULT_MAX_SURGE.into())),
            rolling.max_unavailable.unwrap_or_else(|| IntOrString::String(DEFAULT_MAX_UNAVAILABLE.into())),
        )
    }

    /// Pods above `replicas` the rollout may run (0 for Recreate).
    pub fn max_surge(&self) -> i32 {
        if self.is_recreate() {
            return 0;
        }
        let (surge, unavailable) = self.rolling_parameters();
        resolve_fenceposts(&surge, &unavailable, self.spec.replicas).0
    }

    /// Pods below `replicas` the rollout may leave unavailable, at most `replicas`.
    pub fn max_unavailable(&self) -> i32 {
        if self.is_recreate() || self.spec.replicas == 0 {
            return 0;
        }
        let (surge, unavailable) = self.rolling_parameters();
        resolve_fenceposts(&surge, &unavailable, self.spec.replicas).1.min(self.spec.replicas)
    }

    pub fn revision_history_limit(&self) -> i32 {
        self.spec.revision_history_limit.unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT)
    }

    pub fn progress_deadline_seconds(&self) -> i32 {
        self.spec.progress_deadline_seconds.unwrap_or(DEFAULT_PROGRESS_DEADLINE_SECONDS)
    }

    /// Fills in what Kubernetes defaults: the RollingUpdate strategy at 25 %/25 %, a history
    /// of 10 revisions, a progress deadline of 600 s, and its pod template's defaults.
    pub fn set_defaults(&mut self) {
        let spec = &mut self.spec;
        spec.template.spec.set_defaults();
        if spec.strategy.type_.is_empty() {
            spec.strategy.type_ = ROLLING_UPDATE.into();
        }
        if spec.strategy.type_ == ROLLING_UPDATE {
            let rolling = spec.strategy.rolling_update.get_or_insert_with(Default::default);
            rolling.max_surge.get_or_insert_with(|| IntOrString::String(DEFAULT_MAX_SURGE.into()));
            rolling.max_unavailable.get_or_insert_with(|| IntOrString::String(DEFAULT_MAX_UNAVAILABLE.into()));
        }
        spec.revision_history_limit.get_or_insert(DEFAULT_REVISION_HISTORY_LIMIT);
        spec.progress_deadline_seconds.get_or_insert(DEFAULT_PROGRESS_DEADLINE_SECONDS);
    }
}

/// A ReplicaSet's revision annotation as a number (0 when it has none).
pub fn revision(rs: &ReplicaSet) -> u64 {
    rs.metadata.annotations.get(REVISION_ANNOTATION).and_then(|r| r.parse().ok()).unwrap_or(0)
}

/// A ReplicaSet annotation that holds a count.
pub fn count_annotation(rs: &ReplicaSet, name: &str) -> Option<i32> {
    rs.metadata.annotations.get(name).and_then(|r| r.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn percent(p: &str) -> IntOrString {
        IntOrString::String(p.into())
    }

    #[test]
    fn surge_rounds_up_and_unavailable_down() {
        assert_eq!(resolve_fenceposts(&percent("25%"), &percent("25%"), 10), (3, 2));
        assert_eq!(resolve_fenceposts(&percent("25%"), &percent("25%"), 1), (1, 0));
        assert_eq!(resolve_fenceposts(&IntOrString::Int(2), &percent("50%"), 5), (2, 2));
        assert_eq!(resolve_fenceposts(&percent("0%"), &percent("10%"), 5), (0, 1), "both 0: one may be unavailable");
        assert_eq!(resolve_fenceposts(&IntOrString::Int(0), &IntOrString::Int(0), 5), (0, 1));
        assert_eq!(resolve(&percent("33%"), 10, true), Ok(4));
        assert_eq!(resolve(&percent("33%"), 10, false), Ok(3));
        assert!(resolve(&percent("a%"), 10, false).is_err());
    }

    #[test]
    fn the_hash_is_rendered_in_the_safe_alphabet_and_salted_by_the_collision_count() {
        let mut template = PodTemplateSpec::default();
        template.metadata.labels.insert("app".into(), "web".into());
        let hash = pod_template_hash(&template, None);
        assert!((1..=10).contains(&hash.len()) && hash.bytes().all(|b| SAFE_ALPHABET.contains(&b)), "{hash}");
        assert_eq!(hash, pod_template_hash(&template.clone(), None), "stable");
        assert_ne!(hash, pod_template_hash(&template, Some(1)));
        let mut labelled = template.clone();
        labelled.metadata.labels.insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
        assert!(equal_ignoring_hash(&template, &labelled));
        labelled.spec.restart_policy = "Never".into();
        assert!(!equal_ignoring_hash(&template, &labelled));
        // FNV-1a's published test vector.
        assert_eq!(fnv1a(*b"a"), 0xe40c_292c);
    }
}
