//! The two strategies: `RollingUpdate` within `maxSurge` and `maxUnavailable`, and
//! `Recreate`.

use super::*;

impl Sync<'_> {
    /// `rolloutRolling`: up with the new set within the surge, down with the old ones
    /// within the unavailability, and old history cleaned once complete.
    pub(super) async fn roll(&mut self) -> Result<(), StoreError> {
        self.sync_revision(true).await?;
        if self.reconcile_new().await? || self.reconcile_old().await? {
            return Ok(());
        }
        if complete(&self.d, &self.d.status) {
            self.clean_up().await?;
        }
        Ok(())
    }

    pub(super) async fn reconcile_new(&mut self) -> Result<bool, StoreError> {
        let Some(new) = &self.new else { return Ok(false) };
        let want = self.d.spec.replicas;
        if new.spec.replicas == want {
            return Ok(false);
        }
        let to = if new.spec.replicas > want { want } else { self.new_replicas(new) };
        self.scale_to(Which::New, to).await
    }

    pub(super) async fn reconcile_old(&mut self) -> Result<bool, StoreError> {
        let old_replicas = replicas_of(&self.old);
        if old_replicas == 0 {
            return Ok(false);
        }
        let new = self.new.as_ref();
        let all_replicas = old_replicas + new.map_or(0, |rs| rs.spec.replicas);
        let min_available = self.d.spec.replicas - self.d.max_unavailable();
        let new_unavailable = new.map_or(0, |rs| rs.spec.replicas - rs.status.available_replicas);
        let max_scaled_down = all_replicas - min_available - new_unavailable;
        if max_scaled_down <= 0 {
            return Ok(false);
        }
        let cleaned = self.clean_up_unhealthy(max_scaled_down).await?;
        let scaled = self.scale_down_old().await?;
        Ok(cleaned + scaled > 0)
    }

    /// Old sets' unavailable replicas go first, oldest set first, at most `max`.
    pub(super) async fn clean_up_unhealthy(&mut self, max: i32) -> Result<i32, StoreError> {
        let mut total = 0;
        for i in 0..self.old.len() {
            if total >= max {
                break;
            }
            let rs = &self.old[i];
            if rs.spec.replicas == 0 || rs.spec.replicas == rs.status.available_replicas {
                continue;
            }
            let down = (max - total).min(rs.spec.replicas - rs.status.available_replicas);
            let to = rs.spec.replicas - down;
            self.scale_to(Which::Old(i), to).await?;
            total += down;
        }
        Ok(total)
    }

    /// Old sets shrink, oldest first, while the available pods stay at `replicas -
    /// maxUnavailable` or more.
    pub(super) async fn scale_down_old(&mut self) -> Result<i32, StoreError> {
        let min_available = self.d.spec.replicas - self.d.max_unavailable();
        let available: i32 = self.all().map(|rs| rs.status.available_replicas).sum();
        if available <= min_available {
            return Ok(0);
        }
        let total = available - min_available;
        let mut done = 0;
        for i in 0..self.old.len() {
            if done >= total {
                break;
            }
            let replicas = self.old[i].spec.replicas;
            if replicas == 0 {
                continue;
            }
            let down = replicas.min(total - done);
            self.scale_to(Which::Old(i), replicas - down).await?;
            done += down;
        }
        Ok(done)
    }

    /// `rolloutRecreate`: every old set to zero, then, once no old pod runs, the new set
    /// at `replicas`.
    pub(super) async fn recreate(&mut self) -> Result<(), StoreError> {
        self.sync_revision(false).await?;
        let mut scaled_down = false;
        for i in 0..self.old.len() {
            if self.old[i].spec.replicas > 0 {
                scaled_down |= self.scale_to(Which::Old(i), 0).await?;
            }
        }
        if scaled_down || self.old_pods_running() {
            return Ok(());
        }
        if self.new.is_none() {
            self.sync_revision(true).await?;
        }
        if self.new.is_some() {
            self.scale_to(Which::New, self.d.spec.replicas).await?;
        }
        if complete(&self.d, &self.d.status) {
            self.clean_up().await?;
        }
        Ok(())
    }

    /// Whether a pod of an old set exists that has not finished (terminating ones too).
    pub(super) fn old_pods_running(&self) -> bool {
        if self.old.iter().map(|rs| rs.status.replicas).sum::<i32>() > 0 {
            return true;
        }
        self.old.iter().any(|rs| {
            let key = Key::new(Kind::ReplicaSet, &rs.metadata.namespace, &rs.metadata.name);
            self.store.pods_owned_by(&key).1.iter().any(|o| matches!(&**o, Object::Pod(p) if !p.status.phase.is_terminal()))
        })
    }
}
