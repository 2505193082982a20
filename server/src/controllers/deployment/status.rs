//! The deployment's status and its `Progressing` and `Available` conditions, with the
//! progress deadline and pauses.

use super::*;

/// A deployment condition with both times now.
pub(super) fn condition(type_: &str, status: &str, reason: &str, message: String, now: Time) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        last_transition_time: Some(now),
        last_update_time: Some(now),
        ..Condition::default()
    }
}

/// Kubernetes' `SetDeploymentCondition`: a condition of the same status and reason stays as
/// it is; one of the same status keeps its transition time.
pub(super) fn set_deployment_condition(conditions: &mut Vec<Condition>, mut new: Condition) {
    if let Some(current) = find_condition(conditions, &new.type_) {
        if current.status == new.status && current.reason == new.reason {
            return;
        }
        if current.status == new.status {
            new.last_transition_time = current.last_transition_time;
        }
    }
    conditions.retain(|c| c.type_ != new.type_);
    conditions.push(new);
}

/// Every replica updated, running and available, for the current generation.
pub(super) fn complete(d: &Deployment, status: &DeploymentStatus) -> bool {
    let want = d.spec.replicas;
    status.updated_replicas == want
        && status.replicas == want
        && status.available_replicas == want
        && status.observed_generation >= d.metadata.generation
}

/// Whether `after` moved on from `before`: more updated, ready or available replicas, or
/// fewer old ones.
pub(super) fn progressed(before: &DeploymentStatus, after: &DeploymentStatus) -> bool {
    after.updated_replicas > before.updated_replicas
        || after.replicas - after.updated_replicas < before.replicas - before.updated_replicas
        || after.ready_replicas > before.ready_replicas
        || after.available_replicas > before.available_replicas
}

/// When the progress deadline of the rollout `progressing` reports passes.
pub(super) fn deadline_of(d: &Deployment, progressing: &Condition) -> Option<Time> {
    let from = progressing.last_update_time.or(progressing.last_transition_time)?;
    Some(from + chrono::Duration::seconds(i64::from(d.progress_deadline_seconds())))
}

impl Sync<'_> {
    /// `Progressing` says when a rollout is paused and resumed (a reported timeout stays).
    pub(super) fn note_pause(&mut self) {
        let current = find_condition(&self.d.status.conditions, reasons::PROGRESSING);
        if current.is_some_and(|c| c.reason == reasons::TIMED_OUT) {
            return;
        }
        let noted = current.is_some_and(|c| c.reason == reasons::PAUSED);
        let (reason, message) = match (self.d.spec.paused, noted) {
            (true, false) => (reasons::PAUSED, "Deployment is paused"),
            (false, true) => (reasons::RESUMED, "Deployment is resumed"),
            _ => return,
        };
        let paused = condition(reasons::PROGRESSING, conditions::UNKNOWN, reason, message.into(), self.now);
        set_deployment_condition(&mut self.d.status.conditions, paused);
    }

    /// The status the sets add up to, with `Available` (`calculateStatus`).
    pub(super) fn calculate_status(&self) -> DeploymentStatus {
        let available: i32 = self.all().map(|rs| rs.status.available_replicas).sum();
        let mut status = DeploymentStatus {
            replicas: self.all().map(|rs| rs.status.replicas).sum(),
            updated_replicas: self.new.as_ref().map_or(0, |rs| rs.status.replicas),
            ready_replicas: self.all().map(|rs| rs.status.ready_replicas).sum(),
            available_replicas: available,
            unavailable_replicas: (replicas_of(self.all()) - available).max(0),
            observed_generation: self.d.metadata.generation,
            conditions: self.d.status.conditions.clone(),
            collision_count: self.d.status.collision_count,
        };
        let want = self.d.spec.replicas;
        let availability = if available >= want - self.d.max_unavailable() {
            let message = "Deployment has minimum availability.".to_string();
            Condition {
                status: conditions::TRUE.into(),
                reason: reasons::MINIMUM_REPLICAS_AVAILABLE.into(),
                message,
                ..Condition::default()
            }
        } else {
            let message = self.short_of_availability(available);
            Condition {
                status: conditions::FALSE.into(),
                reason: reasons::MINIMUM_REPLICAS_UNAVAILABLE.into(),
                message,
                ..Condition::default()
            }
        };
        set_condition(&mut status.conditions, Condition { type_: reasons::AVAILABLE.into(), ..availability }, self.now);
        status
    }

    /// Why availability is short: how many replicas are available, and how many pods the
    /// scheduler cannot place, with its reason for one of them (Kubernetes says only that
    /// availability is short).
    pub(super) fn short_of_availability(&self, available: i32) -> String {
        let mut message =
            format!("Deployment does not have minimum availability: {available} of {} replicas are available.", self.d.spec.replicas);
        let mut unschedulable = 0;
        let mut why = None;
        for rs in self.all().filter(|rs| rs.spec.replicas > 0) {
            let key = Key::new(Kind::ReplicaSet, &rs.metadata.namespace, &rs.metadata.name);
            for pod in self.store.pods_owned_by(&key).1 {
                if let Object::Pod(p) = &*pod
                    && p.spec.node_name.is_empty()
                    && p.metadata.deletion_timestamp.is_none()
                    && let Some(reason) = p.unschedulable_because()
                {
                    unschedulable += 1;
                    why.get_or_insert_with(|| reason.to_string());
                }
            }
        }
        if let Some(why) = why {
            let pods = if unschedulable == 1 { "1 pod".to_string() } else { format!("{unschedulable} pods") };
            message.push_str(&format!(" {pods} cannot be scheduled: {why}"));
        }
        message
    }

    /// Computes the status; with `progress`, the `Progressing` condition and its deadline
    /// and the sets' `ReplicaFailure` (`syncRolloutStatus`); writes the revision annotation
    /// and status when they changed, and asks to look again at the progress deadline.
    pub(super) async fn finish(&mut self, progress: bool) -> Result<Action, StoreError> {
        let mut status = self.calculate_status();
        let mut action = Action::AwaitChange;
        if progress {
            self.note_progress(&mut status);
            let failure = self.all().find_map(|rs| find_condition(&rs.status.conditions, reasons::REPLICA_FAILURE)).cloned();
            match failure {
                Some(failure) => set_deployment_condition(&mut status.conditions, failure),
                None => status.conditions.retain(|c| c.type_ != reasons::REPLICA_FAILURE),
            }
            // Level-triggered: look again when the deadline passes, if nothing changes first.
            let current = find_condition(&self.d.status.conditions, reasons::PROGRESSING);
            if let Some(deadline) = current.filter(|c| c.reason != reasons::TIMED_OUT).and_then(|c| deadline_of(&self.d, c))
                && !complete(&self.d, &status)
            {
                let after = (deadline - self.now).to_std().unwrap_or(Duration::ZERO);
                action = Action::RequeueAfter(after + Duration::from_secs(1));
            }
        }
        let annotation = self.d.metadata.annotations.get(REVISION_ANNOTATION).cloned();
        if status == self.stored.status && annotation == self.stored.metadata.annotations.get(REVISION_ANNOTATION).cloned() {
            return Ok(action);
        }
        let expected = self.stored.metadata.resource_version;
        let key = Key::of(&Object::Deployment(Box::new(self.stored.clone())));
        let write = ops::modify::<Deployment>(key, move |_, d| {
            if d.metadata.resource_version != expected {
                return Err(StoreError::conflict("the deployment changed during the sync"));
            }
            d.status = status.clone();
            if let Some(revision) = &annotation {
                d.metadata.annotations.insert(REVISION_ANNOTATION.into(), revision.clone());
            }
            Ok(())
        });
        match self.store.commit(Txn::new().with(write)).await {
            Ok(_) | Err(StoreError::NotFound { .. }) => Ok(action),
            Err(e) => Err(e),
        }
    }

    /// `Progressing`: complete, progressing (its update time now), or past its deadline.
    pub(super) fn note_progress(&self, status: &mut DeploymentStatus) {
        let current = find_condition(&self.d.status.conditions, reasons::PROGRESSING).cloned();
        let was_complete =
            status.replicas == status.updated_replicas && current.as_ref().is_some_and(|c| c.reason == reasons::NEW_RS_AVAILABLE);
        if was_complete {
            return;
        }
        let name = match &self.new {
            Some(rs) => format!("ReplicaSet {:?}", rs.metadata.name),
            None => format!("Deployment {:?}", self.d.metadata.name),
        };
        if complete(&self.d, status) {
            let done = condition(
                reasons::PROGRESSING,
                conditions::TRUE,
                reasons::NEW_RS_AVAILABLE,
                format!("{name} has successfully progressed."),
                self.now,
            );
            set_deployment_condition(&mut status.conditions, done);
        } else if progressed(&self.d.status, status) {
            let mut moving =
                condition(reasons::PROGRESSING, conditions::TRUE, reasons::RS_UPDATED, format!("{name} is progressing."), self.now);
            if let Some(current) = &current {
                if current.status == conditions::TRUE {
                    moving.last_transition_time = current.last_transition_time;
                }
                status.conditions.retain(|c| c.type_ != reasons::PROGRESSING);
            }
            set_deployment_condition(&mut status.conditions, moving);
        } else if self.timed_out(status) {
            let stuck = condition(
                reasons::PROGRESSING,
                conditions::FALSE,
                reasons::TIMED_OUT,
                format!("{name} has timed out progressing."),
                self.now,
            );
            set_deployment_condition(&mut status.conditions, stuck);
        }
    }

    pub(super) fn timed_out(&self, status: &DeploymentStatus) -> bool {
        match find_condition(&status.conditions, reasons::PROGRESSING) {
            Some(c) if c.reason == reasons::NEW_RS_AVAILABLE => false,
            Some(c) if c.reason == reasons::TIMED_OUT => true,
            Some(c) => deadline_of(&self.d, c).is_some_and(|deadline| deadline < self.now),
            None => false,
        }
    }
}
