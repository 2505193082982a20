//! One sync of a deployment: its sets as read, the new set's revision and the writes of the
//! sets, then the clean-up of old revisions.

use super::*;

/// Which of a sync's sets: the new one or an old one (by index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Which {
    New,
    Old(usize),
}

/// One sync of a deployment (`syncDeployment`): its sets as read and as this sync changes
/// them, and the deployment whose revision annotation and status it writes once, at the end.
pub(super) struct Sync<'a> {
    pub(super) store: &'a Arc<dyn Store>,
    pub(super) now: Time,
    /// The deployment as read.
    pub(super) stored: Deployment,
    /// The deployment with this sync's revision annotation and conditions.
    pub(super) d: Deployment,
    /// The set whose template is the deployment's.
    pub(super) new: Option<ReplicaSet>,
    /// The others, oldest first.
    pub(super) old: Vec<ReplicaSet>,
}

impl Sync<'_> {
    pub(super) async fn run(&mut self) -> Result<Action, StoreError> {
        self.note_pause();
        if self.d.spec.paused || self.is_scaling_event() {
            self.sync_revision(false).await?;
            self.scale().await?;
            if self.d.spec.paused {
                self.clean_up().await?;
            }
            return self.finish(false).await;
        }
        if self.d.is_recreate() {
            self.recreate().await?;
        } else {
            self.roll().await?;
        }
        self.finish(true).await
    }

    pub(super) fn all(&self) -> impl Iterator<Item = &ReplicaSet> {
        self.old.iter().chain(self.new.iter())
    }

    pub(super) fn get(&self, which: Which) -> &ReplicaSet {
        match which {
            Which::New => self.new.as_ref().expect("the new set exists when named"),
            Which::Old(i) => &self.old[i],
        }
    }

    pub(super) fn event(&self, reason: &str, message: String) -> Write {
        let involved = events::reference(&Object::Deployment(Box::new(self.d.clone())));
        events::record(events::new_event(involved, event_types::NORMAL, reason, message, SOURCE_DEPLOYMENT_CONTROLLER), self.now)
    }

    /// Writes a set's spec and annotations (with an event), unless it changed since read.
    pub(super) async fn update(&self, rs: ReplicaSet, event: Option<Write>) -> Result<ReplicaSet, StoreError> {
        let key = Key::new(Kind::ReplicaSet, &rs.metadata.namespace, &rs.metadata.name);
        let expected = rs.metadata.resource_version;
        let write = ops::modify::<ReplicaSet>(key.clone(), move |_, stored| {
            if stored.metadata.resource_version != expected {
                return Err(StoreError::conflict("the replica set changed during the sync"));
            }
            if stored.spec != rs.spec {
                stored.spec = rs.spec.clone();
                stored.metadata.generation += 1;
            }
            stored.metadata.annotations = rs.metadata.annotations.clone();
            Ok(())
        });
        let mut txn = Txn::new().with(write);
        if let Some(event) = event {
            txn.push(event);
        }
        let outcomes = self.store.commit(txn).await?;
        outcomes
            .first()
            .and_then(|o| o.object())
            .and_then(|o| as_rs(o).cloned())
            .ok_or(StoreError::NotFound { kind: Kind::ReplicaSet, key: key.key })
    }

    /// Sizes a set to `to` (and its replicas annotations); true when its size changed.
    pub(super) async fn scale_to(&mut self, which: Which, to: i32) -> Result<bool, StoreError> {
        let rs = self.get(which);
        let resized = rs.spec.replicas != to;
        let mut copy = rs.clone();
        let annotated = self.annotate_replicas(&mut copy);
        if !resized && !annotated {
            return Ok(false);
        }
        copy.spec.replicas = to;
        let event = resized.then(|| {
            let direction = if to > rs.spec.replicas { "up" } else { "down" };
            self.event(
                "ScalingReplicaSet",
                format!("Scaled {direction} replica set {} from {} to {to}", rs.metadata.name, rs.spec.replicas),
            )
        });
        let updated = self.update(copy, event).await?;
        match which {
            Which::New => self.new = Some(updated),
            Which::Old(i) => self.old[i] = updated,
        }
        Ok(resized)
    }

    /// `getAllReplicaSetsAndSyncRevision`: the new set takes the next revision and the
    /// deployment's annotations, and is created when `create` and there is none.
    pub(super) async fn sync_revision(&mut self, create: bool) -> Result<(), StoreError> {
        let new_revision = next_revision(&self.old);
        if let Some(existing) = self.new.clone() {
            let mut rs = existing.clone();
            let mut changed = self.annotate_new(&mut rs, new_revision);
            if rs.spec.min_ready_seconds != self.d.spec.min_ready_seconds {
                rs.spec.min_ready_seconds = self.d.spec.min_ready_seconds;
                changed = true;
            }
            if changed {
                self.new = Some(self.update(rs, None).await?);
            }
            self.note_revision();
            if find_condition(&self.d.status.conditions, reasons::PROGRESSING).is_none() {
                let name = &existing.metadata.name;
                let found = condition(
                    reasons::PROGRESSING,
                    conditions::TRUE,
                    reasons::FOUND_NEW_RS,
                    format!("Found new replica set {name:?}"),
                    self.now,
                );
                set_deployment_condition(&mut self.d.status.conditions, found);
            }
            return Ok(());
        }
        if !create {
            return Ok(());
        }
        let d = &self.d;
        let hash = pod_template_hash(&d.spec.template, d.status.collision_count);
        let mut template = d.spec.template.clone();
        template.metadata.labels.insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
        let mut selector = d.spec.selector.clone();
        selector.match_labels.insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
        let mut rs = ReplicaSet {
            kind: Kind::ReplicaSet.as_str().into(),
            metadata: ObjectMeta {
                name: format!("{}-{hash}", d.metadata.name),
                namespace: d.metadata.namespace.clone(),
                labels: template.metadata.labels.clone(),
                owner_references: vec![controller_reference(Kind::Deployment, &d.metadata)],
                ..ObjectMeta::default()
            },
            spec: ReplicaSetSpec { replicas: 0, min_ready_seconds: d.spec.min_ready_seconds, selector, template },
            status: Default::default(),
        };
        rs.spec.replicas = self.new_replicas(&rs);
        self.annotate_new(&mut rs, new_revision);
        self.annotate_replicas(&mut rs);
        crate::resources::stamp_new(&mut rs, self.now);
        // The API would refuse it (a name over 253 characters): fail as its create would.
        if let Err(details) = shared::validation::validate_replicaset(&rs) {
            return Err(self.note_create_error(&rs, details).await);
        }
        let replicas = rs.spec.replicas;
        let key = Key::new(Kind::ReplicaSet, &rs.metadata.namespace, &rs.metadata.name);
        let mut txn = Txn::new().with(ops::create(rs.clone()));
        if replicas > 0 {
            txn.push(self.event("ScalingReplicaSet", format!("Scaled up replica set {} from 0 to {replicas}", rs.metadata.name)));
        }
        let created = match self.store.commit(txn).await {
            Ok(outcomes) => outcomes.first().and_then(|o| o.object()).and_then(|o| as_rs(o).cloned()).unwrap_or(rs),
            Err(StoreError::AlreadyExists { .. }) => {
                let taken = self.store.get(&key).as_deref().and_then(as_rs).cloned();
                let ours = |rs: &ReplicaSet| {
                    rs.metadata.controller().is_some_and(|r| r.uid == self.d.metadata.uid)
                        && equal_ignoring_hash(&rs.spec.template, &self.d.spec.template)
                };
                match taken.filter(ours) {
                    Some(rs) => rs,
                    None => return Err(self.note_collision(&key).await),
                }
            }
            Err(e) => return Err(e),
        };
        let message = format!("Created new replica set {:?}", created.metadata.name);
        self.new = Some(created);
        self.note_revision();
        set_deployment_condition(
            &mut self.d.status.conditions,
            condition(reasons::PROGRESSING, conditions::TRUE, reasons::NEW_RS_CREATED, message, self.now),
        );
        Ok(())
    }

    /// The new set cannot be created: `Progressing` is False with `ReplicaSetCreateError` and a
    /// Warning event says why, as Kubernetes' `getNewReplicaSet` reports a failed create; the
    /// error requeues the deployment with back-off.
    async fn note_create_error(&self, rs: &ReplicaSet, details: Vec<shared::api::FieldError>) -> StoreError {
        let causes: Vec<String> = details.iter().map(ToString::to_string).collect();
        let invalid = format!("ReplicaSet.apps {:?} is invalid: {}", rs.metadata.name, causes.join(", "));
        let message = format!("Failed to create new replica set {:?}: {invalid}", rs.metadata.name);
        let mut status = self.stored.status.clone();
        let failed = condition(reasons::PROGRESSING, conditions::FALSE, reasons::REPLICA_SET_CREATE_ERROR, message.clone(), self.now);
        set_deployment_condition(&mut status.conditions, failed);
        let expected = self.stored.metadata.resource_version;
        let write = ops::modify::<Deployment>(Key::of(&Object::Deployment(Box::new(self.stored.clone()))), move |_, d| {
            if d.metadata.resource_version != expected {
                return Err(StoreError::conflict("the deployment changed during the sync"));
            }
            d.status = status.clone();
            Ok(())
        });
        let involved = events::reference(&Object::Deployment(Box::new(self.d.clone())));
        let event =
            events::new_event(involved, event_types::WARNING, reasons::REPLICA_SET_CREATE_ERROR, message, SOURCE_DEPLOYMENT_CONTROLLER);
        match self.store.commit(Txn::new().with(write).with(events::record(event, self.now))).await {
            Ok(_) => StoreError::Invalid { message: invalid, details },
            Err(e) => e,
        }
    }

    /// The name of the new set is another's: the next hash is salted by one more collision.
    pub(super) async fn note_collision(&self, key: &Key) -> StoreError {
        let expected = self.stored.metadata.resource_version;
        let write = ops::modify::<Deployment>(Key::of(&Object::Deployment(Box::new(self.stored.clone()))), move |_, d| {
            if d.metadata.resource_version != expected {
                return Err(StoreError::conflict("the deployment changed during the sync"));
            }
            d.status.collision_count = Some(d.status.collision_count.unwrap_or(0) + 1);
            Ok(())
        });
        match self.store.commit(Txn::new().with(write)).await {
            Ok(_) => StoreError::AlreadyExists { kind: key.kind, key: key.key.clone() },
            Err(e) => e,
        }
    }

    /// The deployment's revision is its new set's.
    pub(super) fn note_revision(&mut self) {
        if let Some(revision) = self.new.as_ref().and_then(|rs| rs.metadata.annotations.get(REVISION_ANNOTATION)) {
            self.d.metadata.annotations.insert(REVISION_ANNOTATION.into(), revision.clone());
        }
    }

    /// Sets the desired-replicas and max-replicas annotations a set is sized by; true when
    /// they changed.
    pub(super) fn annotate_replicas(&self, rs: &mut ReplicaSet) -> bool {
        let desired = self.d.spec.replicas.to_string();
        let max = (self.d.spec.replicas + self.d.max_surge()).to_string();
        let annotations = &mut rs.metadata.annotations;
        let changed =
            annotations.get(DESIRED_REPLICAS_ANNOTATION) != Some(&desired) || annotations.get(MAX_REPLICAS_ANNOTATION) != Some(&max);
        annotations.insert(DESIRED_REPLICAS_ANNOTATION.into(), desired);
        annotations.insert(MAX_REPLICAS_ANNOTATION.into(), max);
        changed
    }

    /// The new set's annotations: the deployment's own, and the revision `new_revision` when
    /// its own is older; one whose revision is not a number keeps it, as in Kubernetes'
    /// `SetNewReplicaSetAnnotations`. True when they changed.
    pub(super) fn annotate_new(&self, rs: &mut ReplicaSet, new_revision: i64) -> bool {
        let mut changed = false;
        for (k, v) in &self.d.metadata.annotations {
            if !DEPLOYMENT_OWN_ANNOTATIONS.contains(&k.as_str()) && rs.metadata.annotations.get(k) != Some(v) {
                rs.metadata.annotations.insert(k.clone(), v.clone());
                changed = true;
            }
        }
        if revision(rs).is_some_and(|own| own < new_revision) {
            rs.metadata.annotations.insert(REVISION_ANNOTATION.into(), new_revision.to_string());
            changed = true;
        }
        changed
    }

    /// The replicas the new set may have now: `NewRSNewReplicas`.
    pub(super) fn new_replicas(&self, new: &ReplicaSet) -> i32 {
        let want = self.d.spec.replicas;
        if self.d.is_recreate() {
            return want;
        }
        let current = replicas_of(&self.old) + new.spec.replicas;
        let max_total = want + self.d.max_surge();
        if current >= max_total {
            return new.spec.replicas;
        }
        new.spec.replicas + (max_total - current).min(want - new.spec.replicas)
    }

    /// Deletes the oldest revisions at zero replicas beyond `revisionHistoryLimit`.
    pub(super) async fn clean_up(&mut self) -> Result<(), StoreError> {
        let limit = self.d.revision_history_limit().max(0) as usize;
        let mut cleanable: Vec<&ReplicaSet> = self.old.iter().filter(|rs| rs.metadata.deletion_timestamp.is_none()).collect();
        if cleanable.len() <= limit {
            return Ok(());
        }
        let excess = cleanable.len() - limit;
        cleanable.sort_by_key(|rs| (revision(rs).unwrap_or(0), rs.metadata.created_at, rs.metadata.name.clone()));
        let doomed: Vec<&ReplicaSet> = cleanable[..excess]
            .iter()
            .filter(|rs| rs.status.replicas == 0 && rs.spec.replicas == 0 && rs.metadata.generation <= rs.status.observed_generation)
            .copied()
            .collect();
        if doomed.is_empty() {
            return Ok(());
        }
        delete_sets(self.store, &doomed).await?;
        let gone: Vec<String> = doomed.iter().map(|rs| rs.metadata.name.clone()).collect();
        self.old.retain(|rs| !gone.contains(&rs.metadata.name));
        Ok(())
    }
}
