//! Failed authentications per peer address: too many within a window and
//! the peer is refused for a while, whatever token it brings. Pure: the
//! caller passes the time in.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::Duration;

use tokio::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FailureLimit {
    /// Failures within `window` that block a peer.
    pub max_failures: usize,
    pub window: Duration,
    /// How long a blocked peer is refused.
    pub block: Duration,
    /// The most peers remembered: what bounds the memory a scan from many
    /// addresses can take.
    pub max_peers: usize,
}

pub(crate) const FAILURE_LIMIT: FailureLimit = FailureLimit {
    max_failures: 10,
    window: Duration::from_secs(60),
    block: Duration::from_secs(60),
    max_peers: 4096,
};

#[derive(Debug, Default)]
struct Peer {
    /// The times of the failures within the window, oldest first (at most
    /// `max_failures`).
    failures: VecDeque<Instant>,
    blocked_until: Option<Instant>,
}

impl Peer {
    /// When this peer stops mattering: its block ends, or its last
    /// failure leaves the window.
    fn expires(&self, window: Duration) -> Option<Instant> {
        let last = self.failures.back().map(|t| *t + window);
        last.max(self.blocked_until)
    }
}

#[derive(Debug)]
pub(crate) struct PeerFailures {
    limit: FailureLimit,
    peers: HashMap<IpAddr, Peer>,
}

impl PeerFailures {
    pub(crate) fn new(limit: FailureLimit) -> PeerFailures {
        PeerFailures {
            limit,
            peers: HashMap::new(),
        }
    }

    /// How much longer `peer` is refused, if it is.
    pub(crate) fn blocked(&mut self, peer: IpAddr, now: Instant) -> Option<Duration> {
        let until = self.peers.get(&peer)?.blocked_until?;
        if until > now {
            return Some(until - now);
        }
        self.peers.remove(&peer);
        None
    }

    /// Records one failed authentication of `peer`; true when it is the
    /// one that blocks the peer.
    pub(crate) fn fail(&mut self, peer: IpAddr, now: Instant) -> bool {
        if !self.peers.contains_key(&peer) && self.peers.len() >= self.limit.max_peers {
            self.make_room(now);
        }
        let limit = self.limit;
        let p = self.peers.entry(peer).or_default();
        while p
            .failures
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= limit.window)
        {
            p.failures.pop_front();
        }
        p.failures.push_back(now);
        if p.failures.len() < limit.max_failures {
            return false;
        }
        p.failures.clear();
        p.blocked_until = Some(now + limit.block);
        true
    }

    /// Forgets the peers that no longer matter; if all still do, the
    /// unblocked one that would expire first, so that a flood of new
    /// addresses costs the memory bound nothing and cannot lift a block
    /// (only when every remembered peer is blocked does the oldest block go).
    fn make_room(&mut self, now: Instant) {
        let window = self.limit.window;
        self.peers
            .retain(|_, p| p.expires(window).is_some_and(|t| t > now));
        if self.peers.len() < self.limit.max_peers {
            return;
        }
        let first = self
            .peers
            .iter()
            .min_by_key(|(_, p)| (p.blocked_until.is_some(), p.expires(window)))
            .map(|(ip, _)| *ip);
        if let Some(ip) = first {
            self.peers.remove(&ip);
        }
    }

    #[cfg(test)]
    pub(crate) fn peers(&self) -> usize {
        self.peers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: FailureLimit = FailureLimit {
        max_failures: 3,
        window: Duration::from_secs(60),
        block: Duration::from_secs(30),
        max_peers: 4,
    };

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, n])
    }

    #[test]
    fn the_failure_that_reaches_the_limit_blocks_the_peer_for_the_block_time() {
        let t0 = Instant::now();
        let mut f = PeerFailures::new(LIMIT);
        assert!(!f.fail(ip(1), t0));
        assert!(!f.fail(ip(1), t0 + Duration::from_secs(1)));
        assert_eq!(f.blocked(ip(1), t0 + Duration::from_secs(1)), None);
        assert!(f.fail(ip(1), t0 + Duration::from_secs(2)));
        let at = t0 + Duration::from_secs(12);
        assert_eq!(f.blocked(ip(1), at), Some(Duration::from_secs(20)));
        assert_eq!(f.blocked(ip(2), at), None, "another peer is untouched");
        assert_eq!(f.blocked(ip(1), t0 + Duration::from_secs(32)), None);
        assert_eq!(f.peers(), 0, "an ended block is forgotten");
    }

    #[test]
    fn failures_older_than_the_window_do_not_count() {
        let t0 = Instant::now();
        let mut f = PeerFailures::new(LIMIT);
        assert!(!f.fail(ip(1), t0));
        assert!(!f.fail(ip(1), t0 + Duration::from_secs(30)));
        // The first left the window: two within it, not three.
        assert!(!f.fail(ip(1), t0 + Duration::from_secs(60)));
        assert!(f.fail(ip(1), t0 + Duration::from_secs(61)));
    }

    #[test]
    fn the_map_never_holds_more_than_max_peers_and_a_flood_lifts_no_block() {
        let t0 = Instant::now();
        let mut f = PeerFailures::new(LIMIT);
        for _ in 0..3 {
            f.fail(ip(1), t0);
        }
        for n in 2..=200 {
            f.fail(ip(n), t0 + Duration::from_millis(u64::from(n)));
            assert!(f.peers() <= LIMIT.max_peers);
        }
        assert_eq!(f.peers(), LIMIT.max_peers);
        assert!(f.blocked(ip(1), t0 + Duration::from_secs(1)).is_some());
        // Stale peers make room before anyone current is dropped.
        f.fail(ip(250), t0 + Duration::from_secs(1000));
        assert_eq!(f.peers(), 1);
    }
}
