//! The one exponential back-off curve: `base`, doubling on each failure, capped at `max`.
//! Every retry loop (the scheduling queue, controllers, the agent's restarts, pulls and
//! watches, sheepctl's and the dashboard's watches) takes its waits from here, with its own
//! `base` and `max`.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Backoff {
    pub const fn new(base: Duration, max: Duration) -> Backoff {
        Backoff { base, max }
    }

    /// The wait after `failures` failures in a row: nothing before the first, then `base`,
    /// `2 × base`, `4 × base`, … up to `max`. Never overflows, however many failures.
    pub fn delay(&self, failures: u32) -> Duration {
        let Some(doublings) = failures.checked_sub(1) else { return Duration::ZERO };
        let factor = 1u32.checked_shl(doublings.min(31)).unwrap_or(u32::MAX);
        self.base.checked_mul(factor).map_or(self.max, |d| d.min(self.max))
    }

    /// The wait after `current`: twice it, but at least `base` and at most `max`.
    pub fn next(&self, current: Duration) -> Duration {
        current.saturating_mul(2).clamp(self.base, self.max.max(self.base))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_base_to_max() {
        let curve = Backoff::new(Duration::from_secs(1), Duration::from_secs(10));
        let waits: Vec<u64> = (0..=6).map(|f| curve.delay(f).as_secs()).collect();
        assert_eq!(waits, [0, 1, 2, 4, 8, 10, 10]);
        assert_eq!(curve.delay(u32::MAX), Duration::from_secs(10));
    }

    #[test]
    fn next_doubles_within_its_bounds() {
        let curve = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
        assert_eq!(curve.next(Duration::ZERO), Duration::from_millis(200));
        assert_eq!(curve.next(Duration::from_secs(1)), Duration::from_secs(2));
        assert_eq!(curve.next(Duration::from_secs(4)), Duration::from_secs(5));
        assert_eq!(curve.next(Duration::MAX), Duration::from_secs(5));
    }
}
