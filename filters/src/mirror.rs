//! Which requests a route mirrors, and how many shadow copies each gets.
//! Pure: the caller passes the session key (when the route samples by a
//! header) and a seed drawn when the snapshot is built.
//!
//! Which requests are mirrored is a [`SessionSampler`]'s choice. Fractional
//! copies draw from a second random stream over the mirrored requests only,
//! so the two choices are independent.

mod metrics;

use crate::hash::mix64;
use crate::sampling::{below, share, RandomStream, SessionSampler};

pub use metrics::{
    MirrorMetrics, MirrorResult, MirrorRouteMetrics, StabilityMetrics, ANSWER_DISPERSION_METRIC,
    ANSWER_PAIRWISE_METRIC, EMBEDDING_KL_METRIC, EMBEDDING_SIMILARITY_METRIC,
};

/// A seed offset for the extras' stream, apart from the picks'.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;
/// Keeps mirror sampling independent of the sticky pick, which hashes the
/// same session header.
const SESSION_SALT: u64 = 0x6d69_7272_6f72_5f31;

/// The sampling part of a route's mirror policy.
#[derive(Debug)]
pub struct MirrorSampler {
    picks: SessionSampler,
    whole_copies: u32,
    /// The fractional part of `copies` as a share of 2⁶⁴.
    extra_threshold: u64,
    extras: RandomStream,
}

impl MirrorSampler {
    /// `percent` in 0..=100, `copies` > 0 (2.5 = two copies, a third half of
    /// the time), `seed` random per snapshot.
    pub fn new(percent: f64, copies: f64, seed: u64) -> MirrorSampler {
        let copies = copies.max(0.0);
        MirrorSampler {
            picks: SessionSampler::new(percent, seed, SESSION_SALT),
            whole_copies: copies.trunc() as u32,
            extra_threshold: share(copies.fract()),
            extras: RandomStream::new(mix64(seed ^ GOLDEN)),
        }
    }

    /// How many shadow copies this request gets; 0 = not mirrored. With a
    /// `session` (the `sample_by` header's value) the choice depends on the
    /// session alone, so a session is mirrored whole or not at all.
    pub fn copies(&self, session: Option<&[u8]>) -> u32 {
        if !self.picks.keeps(session) {
            return 0;
        }
        let extra = self.extra_threshold > 0 && below(self.extras.next(), self.extra_threshold);
        self.whole_copies + u32::from(extra)
    }
}

#[cfg(test)]
mod tests;
