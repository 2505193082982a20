//! The rules of a rollout that more than one crate needs: the pod-template hash that names a
//! deployment's ReplicaSets, the labels and annotations a rollout writes, the strategy's
//! defaults, how `maxSurge` and `maxUnavailable` resolve to pod counts, all as Kubernetes
//! has them (`pkg/controller/deployment/util`), and a deployment's revision history and
//! what undoing to one of its revisions writes, as kubectl computes them
//! (`pkg/polymorphichelpers/{history,rollback}.go`).

use std::collections::BTreeMap;

use crate::model::{Deployment, IntOrString, Labels, PodTemplateSpec, ReplicaSet};

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
/// Why a revision was made, shown by `rollout history`.
pub const CHANGE_CAUSE_ANNOTATION: &str = "kubernetes.io/change-cause";
/// Annotations that belong to the deployment itself: a ReplicaSet does not take them from its
/// deployment, and undoing to a revision keeps the deployment's own.
pub const DEPLOYMENT_OWN_ANNOTATIONS: [&str; 6] = [
    crate::model::KUBECTL_LAST_APPLIED,
    REVISION_ANNOTATION,
    "deployment.kubernetes.io/revision-history",
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
    "deprecated.deployment.rollback.to",
];

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
    /// The deployment controller could not create the new ReplicaSet (the reason of both
    /// the `Progressing` condition and the Warning event).
    pub const REPLICA_SET_CREATE_ERROR: &str = "ReplicaSetCreateError";
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

/// A ReplicaSet's revision annotation as Kubernetes reads it, an int64: 0 when it has
/// none, `None` when it is not one (`deploymentutil.Revision`).
pub fn revision(rs: &ReplicaSet) -> Option<i64> {
    match rs.metadata.annotations.get(REVISION_ANNOTATION) {
        None => Some(0),
        Some(text) => text.parse().ok(),
    }
}

/// The revision a deployment's new ReplicaSet takes: one past the highest of its old ones,
/// skipping those whose revision is not a number (`MaxRevision` + 1). As in Kubernetes, the
/// sum wraps past i64::MAX, and a wrapped revision is older than any the new set holds, so
/// it keeps its own.
pub fn next_revision<'a>(old: impl IntoIterator<Item = &'a ReplicaSet>) -> i64 {
    old.into_iter().filter_map(revision).fold(0, i64::max).wrapping_add(1)
}

/// A ReplicaSet annotation that holds a count.
pub fn count_annotation(rs: &ReplicaSet, name: &str) -> Option<i32> {
    rs.metadata.annotations.get(name).and_then(|r| r.parse().ok())
}

/// The ReplicaSets a deployment controls: its controller reference names the deployment's uid
/// and its selector matches them, as `kubectl` finds them.
pub fn controlled_sets<'a>(deployment: &Deployment, sets: &'a [ReplicaSet]) -> Vec<&'a ReplicaSet> {
    sets.iter()
        .filter(|rs| rs.metadata.controller().is_some_and(|r| r.uid == deployment.metadata.uid))
        .filter(|rs| deployment.spec.selector.matches(&rs.metadata.labels))
        .collect()
}

/// A deployment's new ReplicaSet (the oldest whose template is the deployment's) and its old
/// ones, each oldest first.
pub fn new_and_old_sets<'a>(deployment: &Deployment, sets: &'a [ReplicaSet]) -> (Option<&'a ReplicaSet>, Vec<&'a ReplicaSet>) {
    let mut controlled = controlled_sets(deployment, sets);
    controlled.sort_by(|a, b| (a.metadata.created_at, &a.metadata.name).cmp(&(b.metadata.created_at, &b.metadata.name)));
    let new = controlled.iter().position(|rs| equal_ignoring_hash(&rs.spec.template, &deployment.spec.template));
    let new = new.map(|i| controlled.remove(i));
    (new, controlled)
}

/// Where a deployment's rollout stands, in `kubectl rollout status`'s words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RolloutStatus {
    Waiting(String),
    Done(String),
}

/// Why a rollout will not finish by itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("deployment {0:?} exceeded its progress deadline")]
pub struct ProgressDeadlineExceeded(pub String);

/// `kubectl rollout status`'s rule: done once the controller has seen the latest spec, every
/// replica runs the new template, no old one remains and every updated one is available.
pub fn rollout_status(deployment: &Deployment) -> Result<RolloutStatus, ProgressDeadlineExceeded> {
    let (name, status, desired) = (&deployment.metadata.name, &deployment.status, deployment.spec.replicas);
    let waiting = |what: String| Ok(RolloutStatus::Waiting(format!("Waiting for deployment {name:?} rollout to finish: {what}...")));
    if deployment.metadata.generation > status.observed_generation {
        return Ok(RolloutStatus::Waiting("Waiting for deployment spec update to be observed...".into()));
    }
    let progressing = status.conditions.iter().find(|c| c.type_ == reasons::PROGRESSING);
    if progressing.is_some_and(|c| c.reason == reasons::TIMED_OUT) {
        return Err(ProgressDeadlineExceeded(name.clone()));
    }
    if status.updated_replicas < desired {
        return waiting(format!("{} out of {desired} new replicas have been updated", status.updated_replicas));
    }
    if status.replicas > status.updated_replicas {
        return waiting(format!("{} old replicas are pending termination", status.replicas - status.updated_replicas));
    }
    if status.available_replicas < status.updated_replicas {
        return waiting(format!("{} of {} updated replicas are available", status.available_replicas, status.updated_replicas));
    }
    Ok(RolloutStatus::Done(format!("deployment {name:?} successfully rolled out")))
}

/// One revision of a deployment: the ReplicaSet that holds its template.
#[derive(Debug, Clone, PartialEq)]
pub struct Revision<'a> {
    pub number: i64,
    pub replica_set: &'a ReplicaSet,
}

impl Revision<'_> {
    pub fn template(&self) -> &PodTemplateSpec {
        &self.replica_set.spec.template
    }

    pub fn change_cause(&self) -> Option<&str> {
        self.replica_set.metadata.annotations.get(CHANGE_CAUSE_ANNOTATION).map(String::as_str).filter(|c| !c.is_empty())
    }
}

/// A deployment's revisions, oldest first, one per number: those of the ReplicaSets it
/// controls. A set without the annotation is revision 0 and one whose annotation is not a
/// number is left out, as kubectl does.
pub fn history<'a>(deployment: &Deployment, sets: &'a [ReplicaSet]) -> Vec<Revision<'a>> {
    let mut by_number = BTreeMap::new();
    for rs in controlled_sets(deployment, sets) {
        if let Some(number) = revision(rs) {
            by_number.insert(number, Revision { number, replica_set: rs });
        }
    }
    by_number.into_values().collect()
}

/// Why `rollout undo` refuses, in kubectl's words; the command to resume is `sheepctl`'s, the
/// only client that undoes through this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UndoError {
    #[error("unable to find specified revision {0} in history")]
    UnknownRevision(i64),
    #[error("no rollout history found for deployment {0:?}")]
    NoPreviousRevision(String),
    #[error("you cannot rollback a paused deployment; resume it first with 'sheepctl rollout resume deploy/{0}' and try again")]
    Paused(String),
}

/// What undoing a deployment to a revision does.
#[derive(Debug, Clone, PartialEq)]
pub enum Undo {
    /// The deployment already runs that revision's template: nothing to write.
    AlreadyCurrent { revision: i64 },
    /// Write this template and these annotations to the deployment.
    RollBack(Box<Rollback>),
}

impl Undo {
    /// What kubectl prints after the deployment's name.
    pub fn summary(&self) -> String {
        match self {
            Undo::AlreadyCurrent { revision } => format!("skipped rollback (current template already matches revision {revision})"),
            Undo::RollBack(_) => "rolled back".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rollback {
    pub revision: i64,
    /// The revision's template without its pod-template-hash label.
    pub template: PodTemplateSpec,
    /// The deployment's own annotations ([`DEPLOYMENT_OWN_ANNOTATIONS`]) and the revision's
    /// ReplicaSet's others; every other annotation of the deployment goes.
    pub annotations: Labels,
}

impl Rollback {
    pub fn apply_to(self, deployment: &mut Deployment) {
        deployment.spec.template = self.template;
        deployment.metadata.annotations = self.annotations;
    }
}

/// What `rollout undo --to-revision=to_revision` does to `deployment`, given the ReplicaSets of
/// its namespace. Revision 0 means the previous one: the second highest there is.
pub fn undo(deployment: &Deployment, sets: &[ReplicaSet], to_revision: i64) -> Result<Undo, UndoError> {
    let history = history(deployment, sets);
    let target = if to_revision == 0 {
        let mut newest_first = history.iter().rev();
        newest_first.next();
        newest_first.next().ok_or_else(|| UndoError::NoPreviousRevision(deployment.metadata.name.clone()))?
    } else {
        history.iter().find(|r| r.number == to_revision).ok_or(UndoError::UnknownRevision(to_revision))?
    };
    if deployment.spec.paused {
        return Err(UndoError::Paused(deployment.metadata.name.clone()));
    }
    if equal_ignoring_hash(target.template(), &deployment.spec.template) {
        return Ok(Undo::AlreadyCurrent { revision: target.number });
    }
    let mut template = target.template().clone();
    template.metadata.labels.remove(POD_TEMPLATE_HASH_LABEL);
    let own = |name: &str| DEPLOYMENT_OWN_ANNOTATIONS.contains(&name);
    let kept = deployment.metadata.annotations.iter().filter(|(name, _)| own(name));
    let taken = target.replica_set.metadata.annotations.iter().filter(|(name, _)| !own(name));
    // Filled by insertion: collecting into a map sorts first, and that sort would be one more
    // copy of the standard library's sort in the dashboard's wasm.
    let mut annotations = Labels::new();
    for (name, value) in kept.chain(taken) {
        annotations.insert(name.clone(), value.clone());
    }
    Ok(Undo::RollBack(Box::new(Rollback { revision: target.number, template, annotations })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ObjectMeta, OwnerReference};

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

    fn deployment(image: &str) -> Deployment {
        let mut d = Deployment { metadata: ObjectMeta::named("default", "shop"), ..Default::default() };
        d.metadata.uid = "d-uid".into();
        d.spec.selector.match_labels.insert("app".into(), "shop".into());
        d.spec.template.metadata.labels.insert("app".into(), "shop".into());
        d.spec.template.spec.containers.push(crate::model::Container { name: "front".into(), image: image.into(), ..Default::default() });
        d
    }

    /// The ReplicaSet the controller makes of `d`'s template at `revision`.
    fn set_of(d: &Deployment, revision: i64) -> ReplicaSet {
        let hash = pod_template_hash(&d.spec.template, None);
        let mut rs = ReplicaSet { metadata: ObjectMeta::named("default", &format!("shop-{hash}")), ..Default::default() };
        rs.metadata.labels = d.spec.template.metadata.labels.clone();
        rs.metadata.labels.insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
        rs.metadata.annotations.insert(REVISION_ANNOTATION.into(), revision.to_string());
        rs.metadata.created_at = chrono::DateTime::from_timestamp(revision, 0);
        rs.metadata.owner_references.push(OwnerReference {
            kind: "Deployment".into(),
            name: "shop".into(),
            uid: "d-uid".into(),
            controller: true,
            block_owner_deletion: true,
        });
        rs.spec.template = d.spec.template.clone();
        rs.spec.template.metadata.labels.insert(POD_TEMPLATE_HASH_LABEL.into(), hash);
        rs
    }

    /// A deployment rolled from `nginx:1` to `nginx:2` to `nginx:3`, and its three sets.
    fn rolled_three_times() -> (Deployment, Vec<ReplicaSet>) {
        let mut sets = Vec::new();
        let mut d = deployment("nginx:1");
        for (revision, image) in [(1, "nginx:1"), (2, "nginx:2"), (3, "nginx:3")] {
            d.spec.template.spec.containers[0].image = image.into();
            let mut rs = set_of(&d, revision);
            rs.metadata.annotations.insert(CHANGE_CAUSE_ANNOTATION.into(), format!("set image {image}"));
            sets.push(rs);
        }
        d.metadata.annotations.insert(REVISION_ANNOTATION.into(), "3".into());
        (d, sets)
    }

    fn image_of(template: &PodTemplateSpec) -> &str {
        &template.spec.containers[0].image
    }

    #[test]
    fn the_new_set_is_the_one_of_the_current_template() {
        let (d, mut sets) = rolled_three_times();
        sets.reverse();
        let (new, old) = new_and_old_sets(&d, &sets);
        assert_eq!(new.and_then(revision), Some(3));
        assert_eq!(old.into_iter().filter_map(revision).collect::<Vec<_>>(), [1, 2], "oldest first");
        let (new, old) = new_and_old_sets(&deployment("nginx:4"), &sets);
        assert_eq!((new, old.len()), (None, 3));
    }

    #[test]
    fn rollout_status_follows_kubectl() {
        let (mut d, _) = rolled_three_times();
        d.spec.replicas = 3;
        d.metadata.generation = 2;
        d.status.observed_generation = 1;
        let waiting = |d: &Deployment| match rollout_status(d) {
            Ok(RolloutStatus::Waiting(line)) => line,
            other => panic!("not waiting: {other:?}"),
        };
        assert_eq!(waiting(&d), "Waiting for deployment spec update to be observed...");
        d.status.observed_generation = 2;
        d.status.replicas = 4;
        d.status.updated_replicas = 1;
        assert_eq!(waiting(&d), "Waiting for deployment \"shop\" rollout to finish: 1 out of 3 new replicas have been updated...");
        d.status.updated_replicas = 3;
        assert_eq!(waiting(&d), "Waiting for deployment \"shop\" rollout to finish: 1 old replicas are pending termination...");
        d.status.replicas = 3;
        d.status.available_replicas = 1;
        assert_eq!(waiting(&d), "Waiting for deployment \"shop\" rollout to finish: 1 of 3 updated replicas are available...");
        d.status.available_replicas = 3;
        assert_eq!(rollout_status(&d), Ok(RolloutStatus::Done("deployment \"shop\" successfully rolled out".into())));

        d.status.updated_replicas = 1;
        let timed_out = crate::model::Condition {
            type_: reasons::PROGRESSING.into(),
            status: "False".into(),
            reason: reasons::TIMED_OUT.into(),
            ..Default::default()
        };
        d.status.conditions.push(timed_out);
        assert_eq!(rollout_status(&d).unwrap_err().to_string(), "deployment \"shop\" exceeded its progress deadline");
    }

    #[test]
    fn history_lists_the_controlled_sets_by_revision() {
        let (d, mut sets) = rolled_three_times();
        sets.swap(0, 2);
        let mut stranger = set_of(&deployment("other:1"), 9);
        stranger.metadata.owner_references[0].uid = "another-uid".into();
        sets.push(stranger);
        let mut unmatched = set_of(&d, 8);
        unmatched.metadata.labels.insert("app".into(), "elsewhere".into());
        sets.push(unmatched);
        let mut garbled = set_of(&d, 7);
        garbled.metadata.annotations.insert(REVISION_ANNOTATION.into(), "seven".into());
        sets.push(garbled);

        let history = history(&d, &sets);
        assert_eq!(history.iter().map(|r| r.number).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(image_of(history[0].template()), "nginx:1");
        assert_eq!(history[1].change_cause(), Some("set image nginx:2"));
    }

    #[test]
    fn undo_goes_back_to_the_previous_revision_without_the_hash_label() {
        let (mut d, sets) = rolled_three_times();
        d.metadata.annotations.insert("team".into(), "web".into());
        d.metadata.annotations.insert("kubectl.kubernetes.io/last-applied-configuration".into(), "{}".into());
        let Ok(Undo::RollBack(rollback)) = undo(&d, &sets, 0) else { panic!("no rollback") };
        assert_eq!(rollback.revision, 2);
        assert_eq!(image_of(&rollback.template), "nginx:2");
        assert!(!rollback.template.metadata.labels.contains_key(POD_TEMPLATE_HASH_LABEL));
        // The deployment keeps its own annotations and takes the set's others; the rest go.
        let expected: Labels = [
            (REVISION_ANNOTATION, "3"),
            ("kubectl.kubernetes.io/last-applied-configuration", "{}"),
            (CHANGE_CAUSE_ANNOTATION, "set image nginx:2"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(rollback.annotations, expected);

        rollback.apply_to(&mut d);
        assert!(equal_ignoring_hash(&d.spec.template, &sets[1].spec.template));
        assert_eq!(undo(&d, &sets, 2), Ok(Undo::AlreadyCurrent { revision: 2 }));
    }

    #[test]
    fn undo_to_a_named_revision_and_its_refusals() {
        let (mut d, sets) = rolled_three_times();
        let Ok(Undo::RollBack(rollback)) = undo(&d, &sets, 1) else { panic!("no rollback") };
        assert_eq!((rollback.revision, image_of(&rollback.template)), (1, "nginx:1"));
        assert_eq!(Undo::RollBack(rollback).summary(), "rolled back");
        let current = undo(&d, &sets, 3);
        assert_eq!(current, Ok(Undo::AlreadyCurrent { revision: 3 }));
        assert_eq!(current.unwrap().summary(), "skipped rollback (current template already matches revision 3)");

        let err = undo(&d, &sets, 5).unwrap_err();
        assert_eq!(err.to_string(), "unable to find specified revision 5 in history");
        let err = undo(&d, &sets[2..], 0).unwrap_err();
        assert_eq!(err.to_string(), "no rollout history found for deployment \"shop\"");
        assert_eq!(undo(&d, &[], 0), Err(UndoError::NoPreviousRevision("shop".into())));

        d.spec.paused = true;
        let err = undo(&d, &sets, 0).unwrap_err();
        assert_eq!(err, UndoError::Paused("shop".into()));
        assert!(err.to_string().contains("'sheepctl rollout resume deploy/shop'"), "{err}");
        assert!(err.to_string().starts_with("you cannot rollback a paused deployment; resume it first"));
        assert_eq!(undo(&d, &sets, 5), Err(UndoError::UnknownRevision(5)), "the revision is looked up first, as kubectl does");
    }
}
