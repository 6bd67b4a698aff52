//! Which requests a route mirrors, and how many shadow copies each gets.
//! Pure: the caller passes the session key (when the route samples by a
//! header) and a seed drawn when the snapshot is built.
//!
//! Without a session key each request draws an independent random number:
//! SplitMix64 over a per-route counter (one relaxed `fetch_add` and a mix, no
//! lock, no thread-local state), seeded per snapshot. Fractional copies draw
//! from a second such stream over the mirrored requests only, so the two
//! choices are independent.

mod metrics;

use std::sync::atomic::{AtomicU64, Ordering};

use crate::hash::{hash_bytes, mix64};

pub use metrics::{MirrorMetrics, MirrorResult, MirrorRouteMetrics};

/// 2⁶⁴/φ, SplitMix64's increment.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;
/// Keeps mirror sampling independent of the sticky pick, which hashes the
/// same session header.
const SESSION_SALT: u64 = 0x6d69_7272_6f72_5f31;

/// The sampling part of a route's mirror policy.
#[derive(Debug)]
pub struct MirrorSampler {
    /// `percent` as a share of 2⁶⁴ (saturating at 100%).
    threshold: u64,
    whole_copies: u32,
    /// The fractional part of `copies` as a share of 2⁶⁴.
    extra_threshold: u64,
    picks: RandomStream,
    extras: RandomStream,
}

impl MirrorSampler {
    /// `percent` in 0..=100, `copies` > 0 (2.5 = two copies, a third half of
    /// the time), `seed` random per snapshot.
    pub fn new(percent: f64, copies: f64, seed: u64) -> MirrorSampler {
        let copies = copies.max(0.0);
        MirrorSampler {
            threshold: share(percent / 100.0),
            whole_copies: copies.trunc() as u32,
            extra_threshold: share(copies.fract()),
            picks: RandomStream::new(mix64(seed)),
            extras: RandomStream::new(mix64(seed ^ GOLDEN)),
        }
    }

    /// How many shadow copies this request gets; 0 = not mirrored. With a
    /// `session` (the `sample_by` header's value) the choice depends on the
    /// session alone, so a session is mirrored whole or not at all.
    pub fn copies(&self, session: Option<&[u8]>) -> u32 {
        let draw = match session {
            Some(key) => mix64(hash_bytes(key) ^ SESSION_SALT),
            None => self.picks.next(),
        };
        if !below(draw, self.threshold) {
            return 0;
        }
        let extra = self.extra_threshold > 0 && below(self.extras.next(), self.extra_threshold);
        self.whole_copies + u32::from(extra)
    }
}

/// `ratio` (0.0..=1.0) of the u64 range; 1.0 and above is `u64::MAX`, which
/// [`below`] treats as "always".
fn share(ratio: f64) -> u64 {
    if ratio.is_nan() || ratio <= 0.0 {
        0
    } else if ratio >= 1.0 {
        u64::MAX
    } else {
        (ratio * 18_446_744_073_709_551_616.0) as u64
    }
}

fn below(draw: u64, threshold: u64) -> bool {
    threshold == u64::MAX || draw < threshold
}

/// A SplitMix64 stream shared by all of a route's requests: the `n`th draw
/// is `mix(offset + n·φ)`, so concurrent requests need only the counter.
#[derive(Debug)]
struct RandomStream {
    offset: u64,
    n: AtomicU64,
}

impl RandomStream {
    fn new(offset: u64) -> RandomStream {
        RandomStream {
            offset,
            n: AtomicU64::new(0),
        }
    }

    fn next(&self) -> u64 {
        let n = self.n.fetch_add(1, Ordering::Relaxed);
        mix64(self.offset.wrapping_add(n.wrapping_mul(GOLDEN)))
    }
}

#[cfg(test)]
mod tests;
