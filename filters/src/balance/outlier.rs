//! Outlier detection (`clusters[].outlier_detection`), as Envoy does its
//! `consecutive_5xx`: an endpoint whose answers failed `consecutive_5xx`
//! times in a row is ejected for `base_ejection` times the number of its
//! ejections (capped at `max_ejection_time`), unless `max_ejection_percent`
//! of the cluster is out already (one endpoint may always be). The count of
//! ejections falls by one for each `interval` an endpoint stays in after its
//! last ejection ended, so an endpoint that fails once in a while is not
//! kept out ever longer.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::EndpointSet;

/// How outliers are found and how long they stay out (ms).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OutlierPolicy {
    pub consecutive_5xx: u32,
    pub interval_ms: u64,
    pub base_ejection_ms: u64,
    /// The longest one ejection lasts (Envoy's `max_ejection_time`, 300 s).
    pub max_ejection_time_ms: u64,
    /// At most this share of the cluster's endpoints out at once (0..=100).
    pub max_ejection_percent: f64,
}

/// Envoy's defaults.
pub const DEFAULT_OUTLIER_POLICY: OutlierPolicy = OutlierPolicy {
    consecutive_5xx: 5,
    interval_ms: 10_000,
    base_ejection_ms: 30_000,
    max_ejection_time_ms: 300_000,
    max_ejection_percent: 10.0,
};

/// One endpoint's answers, as outlier detection keeps them.
#[derive(Debug, Default)]
pub(super) struct Record {
    /// Failed answers in a row.
    consecutive: AtomicU32,
    /// Ejections so far, less the decay.
    ejections: AtomicU32,
    /// When the last ejection ended (ms); 0 = never ejected.
    last_back: AtomicU64,
}

impl EndpointSet {
    /// Records one answer of endpoint `index` (`failed`: a 5xx, or the
    /// upstream broke or timed out after the connect). Returns how long
    /// the endpoint is ejected for when this answer ejected it.
    pub fn record_answer(
        &self,
        index: usize,
        failed: bool,
        now_ms: u64,
        policy: &OutlierPolicy,
    ) -> Option<u64> {
        let record = self.outliers.get(index)?;
        if !failed {
            if record.consecutive.load(Ordering::Relaxed) != 0 {
                record.consecutive.store(0, Ordering::Relaxed);
            }
            return None;
        }
        let run = record.consecutive.fetch_add(1, Ordering::Relaxed) + 1;
        if run < policy.consecutive_5xx || self.is_ejected(index, now_ms) {
            return None;
        }
        if self.ejected_count(now_ms) >= self.max_ejected(policy) {
            // The run goes on; the next failure tries again.
            return None;
        }
        let last_back = record.last_back.load(Ordering::Relaxed);
        let decay = match last_back {
            0 => 0,
            back => now_ms.saturating_sub(back) / policy.interval_ms.max(1),
        };
        let times = record
            .ejections
            .load(Ordering::Relaxed)
            .saturating_sub(u32::try_from(decay).unwrap_or(u32::MAX))
            .saturating_add(1);
        let for_ms = policy
            .base_ejection_ms
            .saturating_mul(u64::from(times))
            .min(policy.max_ejection_time_ms.max(policy.base_ejection_ms));
        self.eject(index, now_ms, for_ms);
        record.ejections.store(times, Ordering::Relaxed);
        record
            .last_back
            .store(now_ms.saturating_add(for_ms), Ordering::Relaxed);
        record.consecutive.store(0, Ordering::Relaxed);
        Some(for_ms)
    }

    fn ejected_count(&self, now_ms: u64) -> usize {
        (0..self.len())
            .filter(|&i| self.is_ejected(i, now_ms))
            .count()
    }

    /// `max_ejection_percent` of the endpoints, and at least one.
    fn max_ejected(&self, policy: &OutlierPolicy) -> usize {
        let share = (self.len() as f64 * policy.max_ejection_percent / 100.0).floor() as usize;
        share.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: OutlierPolicy = DEFAULT_OUTLIER_POLICY;

    fn fail(set: &EndpointSet, i: usize, times: u32, now: u64) -> Option<u64> {
        (0..times)
            .map(|_| set.record_answer(i, true, now, &POLICY))
            .last()
            .flatten()
    }

    #[test]
    fn the_fifth_5xx_in_a_row_ejects_for_the_base_time_and_it_comes_back() {
        let set = EndpointSet::new(2);
        assert_eq!(fail(&set, 0, 4, 1_000), None);
        assert!(!set.is_ejected(0, 1_000));
        assert_eq!(set.record_answer(0, true, 1_000, &POLICY), Some(30_000));
        assert!(set.is_ejected(0, 30_999));
        assert!((0..4).all(|_| set.pick(20_000, 0) == Some(1)));
        assert!(!set.is_ejected(0, 31_000));
        assert!((0..4).any(|_| set.pick(31_000, 0) == Some(0)));
    }

    #[test]
    fn a_good_answer_breaks_the_run() {
        let set = EndpointSet::new(2);
        assert_eq!(fail(&set, 0, 4, 0), None);
        assert_eq!(set.record_answer(0, false, 0, &POLICY), None);
        assert_eq!(fail(&set, 0, 4, 0), None);
        assert!(!set.is_ejected(0, 0));
        assert_eq!(set.record_answer(0, true, 0, &POLICY), Some(30_000));
    }

    #[test]
    fn ejections_grow_with_their_count_up_to_the_cap_and_decay_per_interval() {
        let set = EndpointSet::new(2);
        assert_eq!(fail(&set, 0, 5, 0), Some(30_000));
        // Back at 30 s, failing again at once: twice the base.
        assert_eq!(fail(&set, 0, 5, 30_000), Some(60_000));
        assert_eq!(fail(&set, 0, 5, 90_000), Some(90_000));
        // Back at 180 s; 25 s later (2 intervals) the count fell from 3 to 1.
        assert_eq!(fail(&set, 0, 5, 205_000), Some(60_000));
        let mut now = 265_000;
        let mut last = 0;
        for _ in 0..20 {
            last = fail(&set, 0, 5, now).unwrap_or(0);
            assert!(last > 0, "the fifth failure at {now} ms ejects");
            now += last;
        }
        assert_eq!(last, 300_000, "capped at max_ejection_time");
    }

    #[test]
    fn at_most_the_percent_of_the_cluster_is_out_and_always_one() {
        // 10% of 3 is 0: one endpoint may still be ejected, not two.
        let set = EndpointSet::new(3);
        assert_eq!(fail(&set, 0, 5, 0), Some(30_000));
        assert_eq!(fail(&set, 1, 5, 0), None);
        assert!(!set.is_ejected(1, 0));
        // Once the first is back, the next failure of the second ejects it.
        assert_eq!(set.record_answer(1, true, 30_000, &POLICY), Some(30_000));
        // 50% of 4 is 2.
        let half = OutlierPolicy {
            max_ejection_percent: 50.0,
            ..POLICY
        };
        let set = EndpointSet::new(4);
        let eject = |i| {
            (0..5)
                .filter_map(|_| set.record_answer(i, true, 0, &half))
                .last()
        };
        assert_eq!(
            (eject(0), eject(1), eject(2)),
            (Some(30_000), Some(30_000), None)
        );
    }
}
