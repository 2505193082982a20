//! A change of `replicas` alone, or any while paused, spread over the active sets in
//! proportion to their size (`scale` in Kubernetes' `sync.go`).

use super::*;

impl Sync<'_> {
    /// A change of `replicas` alone: an active set was last sized for another count.
    pub(super) fn is_scaling_event(&self) -> bool {
        self.all()
            .filter(|rs| rs.spec.replicas > 0)
            .any(|rs| count_annotation(rs, DESIRED_REPLICAS_ANNOTATION).is_some_and(|desired| desired != self.d.spec.replicas))
    }

    /// The one set that should hold every replica when there is one: the only active set,
    /// or, with none active, the new one or the newest old one.
    pub(super) fn active_or_latest(&self) -> Option<Which> {
        let active: Vec<Which> = (0..self.old.len())
            .map(Which::Old)
            .chain(self.new.as_ref().map(|_| Which::New))
            .filter(|w| self.get(*w).spec.replicas > 0)
            .collect();
        match active.len() {
            0 if self.new.is_some() => Some(Which::New),
            0 => self.old.iter().enumerate().max_by(|a, b| by_creation(a.1, b.1)).map(|(i, _)| Which::Old(i)),
            1 => Some(active[0]),
            _ => None,
        }
    }

    /// The new set holds every replica and all are available.
    pub(super) fn saturated(&self) -> bool {
        let want = self.d.spec.replicas;
        self.new.as_ref().is_some_and(|rs| {
            count_annotation(rs, DESIRED_REPLICAS_ANNOTATION) == Some(want)
                && rs.spec.replicas == want
                && rs.status.available_replicas == want
        })
    }

    /// `scale`: a change of `replicas` goes to the one active set, or, mid-rollout, to every
    /// active set in proportion to its size (the largest takes what rounding leaves).
    pub(super) async fn scale(&mut self) -> Result<(), StoreError> {
        let want = self.d.spec.replicas;
        if let Some(which) = self.active_or_latest() {
            if self.get(which).spec.replicas != want {
                self.scale_to(which, want).await?;
            }
            return Ok(());
        }
        if self.saturated() {
            for i in 0..self.old.len() {
                if self.old[i].spec.replicas > 0 {
                    self.scale_to(Which::Old(i), 0).await?;
                }
            }
            return Ok(());
        }
        if self.d.is_recreate() {
            return Ok(());
        }
        let mut active: Vec<Which> = (0..self.old.len())
            .map(Which::Old)
            .chain(self.new.as_ref().map(|_| Which::New))
            .filter(|w| self.get(*w).spec.replicas > 0)
            .collect();
        let allowed = if want > 0 { want + self.d.max_surge() } else { 0 };
        let to_add = allowed - active.iter().map(|w| self.get(*w).spec.replicas).sum::<i32>();
        // Largest first; among equals, newest first when growing and oldest first when shrinking.
        let rank = |w: &Which| {
            let rs = self.get(*w);
            (Reverse(rs.spec.replicas), rs.metadata.created_at, rs.metadata.name.clone())
        };
        active.sort_by(|a, b| {
            let (ra, rb) = (rank(a), rank(b));
            if to_add > 0 { ra.0.cmp(&rb.0).then_with(|| (rb.1, &rb.2).cmp(&(ra.1, &ra.2))) } else { ra.cmp(&rb) }
        });
        let mut added = 0;
        let mut sizes: Vec<i32> = Vec::with_capacity(active.len());
        for w in &active {
            let rs = self.get(*w);
            let share = if to_add == 0 { 0 } else { self.proportion(rs, to_add, added) };
            sizes.push(rs.spec.replicas + share);
            added += share;
        }
        if let Some(first) = sizes.first_mut()
            && to_add != 0
        {
            *first = (*first + to_add - added).max(0);
        }
        for (w, size) in active.into_iter().zip(sizes) {
            self.scale_to(w, size).await?;
        }
        Ok(())
    }

    /// A set's share of `to_add` replicas of which `added` are placed (`GetProportion`).
    pub(super) fn proportion(&self, rs: &ReplicaSet, to_add: i32, added: i32) -> i32 {
        if rs.spec.replicas == 0 || to_add == added {
            return 0;
        }
        let allowed = to_add - added;
        let fraction = self.fraction(rs);
        if to_add > 0 { fraction.min(allowed) } else { fraction.max(allowed) }
    }

    /// How many replicas a set gains (or loses) when the deployment resizes: its size scaled
    /// from the `max-replicas` it was sized for to the new `replicas + maxSurge`.
    pub(super) fn fraction(&self, rs: &ReplicaSet) -> i32 {
        let want = self.d.spec.replicas;
        if want == 0 {
            return -rs.spec.replicas;
        }
        let total = want + self.d.max_surge();
        let sized_for = count_annotation(rs, MAX_REPLICAS_ANNOTATION).unwrap_or(self.d.status.replicas);
        if sized_for <= 0 {
            return 0;
        }
        let size = f64::from(rs.spec.replicas) * f64::from(total) / f64::from(sized_for);
        size.round() as i32 - rs.spec.replicas
    }
}
