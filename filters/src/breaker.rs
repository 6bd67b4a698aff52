//! Circuit breakers (`clusters[].circuit_breakers`), as Envoy's: a cluster
//! takes at most `max_requests` requests in flight and `max_pending` waiting
//! for an upstream connection; one more is refused at once (503) instead of
//! queueing behind a server that is already behind. And a retry budget
//! (`clusters[].retry_budget`): retries in flight at most a share of the
//! requests in flight, so that retries cannot multiply the load on a server
//! that fails. The counts are plain atomics shared by every snapshot of the
//! cluster; a slot is given back when its guard drops, however the request
//! ends.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Envoy's default for each breaker.
const DEFAULT_BREAKER_LIMIT: usize = 1024;

/// A cluster's breaker limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerLimits {
    pub max_requests: usize,
    pub max_pending: usize,
}

impl Default for BreakerLimits {
    fn default() -> Self {
        BreakerLimits {
            max_requests: DEFAULT_BREAKER_LIMIT,
            max_pending: DEFAULT_BREAKER_LIMIT,
        }
    }
}

/// Envoy's retry budget: retries in flight at most `percent` of the
/// requests in flight, and `min_concurrent` whatever the share.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryBudget {
    pub percent: f64,
    pub min_concurrent: usize,
}

/// Envoy's defaults: 20%, at least 3.
pub const DEFAULT_RETRY_BUDGET: RetryBudget = RetryBudget {
    percent: 20.0,
    min_concurrent: 3,
};

impl RetryBudget {
    /// The retries allowed in flight while `requests` are.
    pub fn allowed(&self, requests: usize) -> usize {
        let share = (requests as f64 * self.percent / 100.0).floor() as usize;
        share.max(self.min_concurrent)
    }
}

/// Which breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Breaker {
    /// Requests in flight to the cluster.
    Requests,
    /// Requests waiting for an upstream connection.
    Pending,
    /// Retries in flight, under the retry budget.
    Retries,
}

impl Breaker {
    /// The `breaker` label and the config key's stem.
    pub fn name(self) -> &'static str {
        match self {
            Breaker::Requests => "max_requests",
            Breaker::Pending => "max_pending",
            Breaker::Retries => "retry_budget",
        }
    }
}

/// A cluster's counts.
#[derive(Debug, Default)]
pub struct Breakers {
    requests: AtomicUsize,
    pending: AtomicUsize,
    retries: AtomicUsize,
}

/// A place held under one breaker until dropped.
#[derive(Debug)]
pub struct BreakerSlot {
    breakers: Arc<Breakers>,
    which: Breaker,
}

impl Breakers {
    fn count(&self, which: Breaker) -> &AtomicUsize {
        match which {
            Breaker::Requests => &self.requests,
            Breaker::Pending => &self.pending,
            Breaker::Retries => &self.retries,
        }
    }

    /// Takes a place under `which` if fewer than `max` are taken; `None`
    /// (the breaker is open) otherwise.
    pub fn try_enter(self: &Arc<Self>, which: Breaker, max: usize) -> Option<BreakerSlot> {
        let count = self.count(which);
        let before = count.fetch_add(1, Ordering::AcqRel);
        if before >= max {
            count.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(BreakerSlot {
            breakers: self.clone(),
            which,
        })
    }

    /// Places taken now.
    pub fn taken(&self, which: Breaker) -> usize {
        self.count(which).load(Ordering::Acquire)
    }
}

impl Drop for BreakerSlot {
    fn drop(&mut self) {
        self.breakers
            .count(self.which)
            .fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_breaker_opens_at_its_limit_and_closes_as_places_are_given_back() {
        let b = Arc::new(Breakers::default());
        let first = b.try_enter(Breaker::Requests, 2);
        let second = b.try_enter(Breaker::Requests, 2);
        assert!(first.is_some() && second.is_some());
        assert!(b.try_enter(Breaker::Requests, 2).is_none());
        assert_eq!(b.taken(Breaker::Requests), 2, "a refusal takes nothing");
        // The other breaker counts on its own.
        assert!(b.try_enter(Breaker::Pending, 1).is_some());
        drop(first);
        assert_eq!(b.taken(Breaker::Requests), 1);
        assert!(b.try_enter(Breaker::Requests, 2).is_some());
    }

    #[test]
    fn the_retry_budget_is_a_share_of_the_requests_with_a_floor() {
        let b = DEFAULT_RETRY_BUDGET;
        assert_eq!((b.allowed(0), b.allowed(15), b.allowed(19)), (3, 3, 3));
        assert_eq!(
            (b.allowed(20), b.allowed(100), b.allowed(1024)),
            (4, 20, 204)
        );
        let none = RetryBudget {
            percent: 0.0,
            min_concurrent: 0,
        };
        assert_eq!(none.allowed(1_000), 0);
    }

    #[test]
    fn concurrent_entries_never_pass_the_limit() {
        let b = Arc::new(Breakers::default());
        let held: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    let b = b.clone();
                    s.spawn(move || {
                        (0..100)
                            .filter_map(|_| b.try_enter(Breaker::Pending, 50))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        });
        assert_eq!(held.len(), 50);
        assert_eq!(b.taken(Breaker::Pending), 50);
        drop(held);
        assert_eq!(b.taken(Breaker::Pending), 0);
    }
}
