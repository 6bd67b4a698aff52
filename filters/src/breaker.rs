//! Circuit breakers (`clusters[].circuit_breakers`), as Envoy's: a cluster
//! takes at most `max_requests` requests in flight, `max_pending` waiting
//! for an upstream connection and `max_connections` upstream connections
//! open; one more is refused at once (503) instead of queueing behind a
//! server that is already behind. And a retry budget
//! (`clusters[].retry_budget`): retries in flight at most a share of the
//! requests in flight, so that retries cannot multiply the load on a server
//! that fails. The counts are plain atomics shared by every snapshot of the
//! cluster; a request's slot is given back when its guard drops, however
//! the request ends. A connection outlives the request that opened it (the
//! pool keeps it), so its place is taken and given back by explicit calls
//! from the connection's own open and close.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Envoy's default for each breaker.
const DEFAULT_BREAKER_LIMIT: usize = 1024;

/// A cluster's breaker limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerLimits {
    pub max_requests: usize,
    pub max_pending: usize,
    pub max_connections: usize,
}

impl Default for BreakerLimits {
    fn default() -> Self {
        BreakerLimits {
            max_requests: DEFAULT_BREAKER_LIMIT,
            max_pending: DEFAULT_BREAKER_LIMIT,
            max_connections: DEFAULT_BREAKER_LIMIT,
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
    /// Upstream connections open, pooled or in use.
    Connections,
}

impl Breaker {
    /// The `breaker` label and the config key's stem.
    pub fn name(self) -> &'static str {
        match self {
            Breaker::Requests => "max_requests",
            Breaker::Pending => "max_pending",
            Breaker::Retries => "retry_budget",
            Breaker::Connections => "max_connections",
        }
    }
}

/// A cluster's counts.
#[derive(Debug, Default)]
pub struct Breakers {
    requests: AtomicUsize,
    pending: AtomicUsize,
    retries: AtomicUsize,
    connections: AtomicUsize,
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
            Breaker::Connections => &self.connections,
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

    /// Takes a place for a new upstream connection if fewer than `max` are
    /// open; false (the breaker is open, nothing taken) otherwise. The
    /// caller gives it back with [`Breakers::close_connection`] once the
    /// connection is closed, or was never made.
    pub fn open_connection(&self, max: usize) -> bool {
        let before = self.connections.fetch_add(1, Ordering::AcqRel);
        if before >= max {
            self.connections.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Gives back the place of a connection [`Breakers::open_connection`]
    /// let in.
    pub fn close_connection(&self) {
        self.connections.fetch_sub(1, Ordering::AcqRel);
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
    fn connections_open_to_the_limit_and_closes_give_places_back() {
        let b = Breakers::default();
        assert!(b.open_connection(2));
        assert!(b.open_connection(2));
        assert!(!b.open_connection(2));
        assert_eq!(b.taken(Breaker::Connections), 2, "a refusal takes nothing");
        // Requests in flight are counted apart.
        assert_eq!(b.taken(Breaker::Requests), 0);
        b.close_connection();
        assert_eq!(b.taken(Breaker::Connections), 1);
        assert!(b.open_connection(2));
        assert!(!b.open_connection(2));
        b.close_connection();
        b.close_connection();
        assert_eq!(b.taken(Breaker::Connections), 0);
        // A lower limit (a reload) lets nothing more in until enough close.
        assert!(b.open_connection(3) && b.open_connection(3));
        assert!(!b.open_connection(1));
        assert_eq!(b.taken(Breaker::Connections), 2);
    }

    #[test]
    fn concurrent_connections_never_pass_the_limit() {
        let b = Breakers::default();
        let opened: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| (0..100).filter(|_| b.open_connection(50)).count()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
        });
        assert_eq!(opened, 50);
        assert_eq!(b.taken(Breaker::Connections), 50);
        // Opens and closes racing: the places held (counted by the holders,
        // not read from the breaker, whose count a refusal briefly raises)
        // never pass the limit, and all are back at the end.
        let (held, peak) = (AtomicUsize::new(50), AtomicUsize::new(0));
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..1_000 {
                        if b.open_connection(60) {
                            let now = held.fetch_add(1, Ordering::AcqRel) + 1;
                            peak.fetch_max(now, Ordering::AcqRel);
                            held.fetch_sub(1, Ordering::AcqRel);
                            b.close_connection();
                        }
                    }
                });
            }
        });
        assert!(peak.load(Ordering::Acquire) <= 60);
        for _ in 0..50 {
            b.close_connection();
        }
        assert_eq!(b.taken(Breaker::Connections), 0);
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
