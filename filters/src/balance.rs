//! Endpoint choice inside a cluster: round robin that skips endpoints ejected
//! after a connect failure, or by outlier detection after answering 5xx too
//! often in a row (`outlier`), until their ejection ends.
//!
//! Times are milliseconds on a clock the caller owns; this module never reads one.

mod outlier;

pub use outlier::{OutlierPolicy, DEFAULT_OUTLIER_POLICY};

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

#[derive(Debug)]
pub struct EndpointSet {
    next: AtomicUsize,
    /// Per endpoint: the time (ms) until which it is ejected; 0 = healthy.
    ejected_until: Vec<AtomicU64>,
    /// Per endpoint: its answers' record for outlier detection.
    outliers: Vec<outlier::Record>,
}

impl EndpointSet {
    pub fn new(len: usize) -> Self {
        Self {
            next: AtomicUsize::new(0),
            ejected_until: (0..len).map(|_| AtomicU64::new(0)).collect(),
            outliers: (0..len).map(|_| outlier::Record::default()).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.ejected_until.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ejected_until.is_empty()
    }

    /// The next endpoint in turn that is not ejected at `now_ms` and whose bit
    /// is not set in `tried` (endpoints this request already failed on). When
    /// every untried endpoint is ejected, the least recently ejected untried
    /// one is returned anyway: trying a maybe-dead endpoint beats failing
    /// without trying. `None` when all have been tried.
    pub fn pick(&self, now_ms: u64, tried: u64) -> Option<usize> {
        let n = self.len();
        if n == 0 {
            return None;
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let mut fallback: Option<(usize, u64)> = None;
        for k in 0..n {
            let i = (start + k) % n;
            if i < 64 && tried & (1 << i) != 0 {
                continue;
            }
            let until = self.ejected_until[i].load(Ordering::Relaxed);
            if until <= now_ms {
                return Some(i);
            }
            if fallback.is_none_or(|(_, u)| until < u) {
                fallback = Some((i, until));
            }
        }
        fallback.map(|(i, _)| i)
    }

    pub fn eject(&self, index: usize, now_ms: u64, for_ms: u64) {
        if let Some(slot) = self.ejected_until.get(index) {
            slot.store(now_ms.saturating_add(for_ms), Ordering::Relaxed);
        }
    }

    /// A success clears an ejection early.
    pub fn restore(&self, index: usize) {
        if let Some(slot) = self.ejected_until.get(index) {
            if slot.load(Ordering::Relaxed) != 0 {
                slot.store(0, Ordering::Relaxed);
            }
        }
    }

    pub fn is_ejected(&self, index: usize, now_ms: u64) -> bool {
        self.ejected_until
            .get(index)
            .is_some_and(|u| u.load(Ordering::Relaxed) > now_ms)
    }

    /// When every endpoint is ejected at `now_ms`: the time the first of
    /// them is due back. `None` while one is in, or for an empty set.
    pub fn all_ejected_until(&self, now_ms: u64) -> Option<u64> {
        let mut back = None::<u64>;
        for slot in &self.ejected_until {
            let until = slot.load(Ordering::Relaxed);
            if until <= now_ms {
                return None;
            }
            back = Some(back.map_or(until, |b| b.min(until)));
        }
        back
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin() {
        let set = EndpointSet::new(3);
        let picks: Vec<_> = (0..6).filter_map(|_| set.pick(0, 0)).collect();
        assert_eq!(picks, vec![0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn ejected_endpoint_is_skipped_until_its_time_is_up() {
        let set = EndpointSet::new(2);
        set.eject(0, 1_000, 500);
        assert!(set.is_ejected(0, 1_200));
        assert!((0..4).all(|_| set.pick(1_200, 0) == Some(1)));
        assert!(!set.is_ejected(0, 1_500));
        let picks: Vec<_> = (0..4).filter_map(|_| set.pick(1_500, 0)).collect();
        assert!(picks.contains(&0));
    }

    #[test]
    fn tried_endpoints_are_not_retried() {
        let set = EndpointSet::new(2);
        assert_eq!(set.pick(0, 0b01), Some(1));
        assert_eq!(set.pick(0, 0b10), Some(0));
        assert_eq!(set.pick(0, 0b11), None);
    }

    #[test]
    fn all_ejected_until_is_the_first_return_once_none_is_in() {
        let set = EndpointSet::new(2);
        assert_eq!(set.all_ejected_until(0), None);
        set.eject(0, 100, 1_000);
        assert_eq!(set.all_ejected_until(200), None);
        set.eject(1, 50, 2_000);
        assert_eq!(set.all_ejected_until(200), Some(1_100));
        assert_eq!(set.all_ejected_until(1_100), None);
        assert_eq!(EndpointSet::new(0).all_ejected_until(0), None);
    }

    #[test]
    fn all_ejected_falls_back_to_the_one_ejected_longest_ago() {
        let set = EndpointSet::new(2);
        set.eject(0, 100, 1_000);
        set.eject(1, 50, 1_000);
        assert_eq!(set.pick(200, 0), Some(1));
        set.restore(1);
        assert!(!set.is_ejected(1, 200));
    }
}
