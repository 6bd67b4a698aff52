//! Sampling a share of requests, whole sessions at a time: the mirror and
//! the recorder both keep `percent` of the traffic, and with a session key
//! (a header's value) the choice depends on the key alone, the way
//! GoReplay's header limiter hashes a header, so a session is kept whole or
//! not at all.
//!
//! Without a session key each request draws an independent random number:
//! SplitMix64 over a shared counter (one relaxed `fetch_add` and a mix, no
//! lock, no thread-local state), seeded by the caller.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::hash::{hash_bytes, mix64};

/// 2⁶⁴/φ, SplitMix64's increment.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// Keeps `percent` of the requests.
#[derive(Debug)]
pub struct SessionSampler {
    /// `percent` as a share of 2⁶⁴ (saturating at 100%).
    threshold: u64,
    /// Mixed into a session's hash, so that two samplers over the same
    /// header (the mirror's, the recorder's, the sticky pick) choose
    /// independently.
    salt: u64,
    draws: RandomStream,
}

impl SessionSampler {
    /// `percent` in 0..=100; `seed` random per sampler; `salt` fixed per
    /// kind of sampler.
    pub fn new(percent: f64, seed: u64, salt: u64) -> SessionSampler {
        SessionSampler {
            threshold: share(percent / 100.0),
            salt,
            draws: RandomStream::new(mix64(seed)),
        }
    }

    /// Whether this request is kept; with a `session` key, the same answer
    /// for every request of the session.
    pub fn keeps(&self, session: Option<&[u8]>) -> bool {
        let draw = match session {
            Some(key) => mix64(hash_bytes(key) ^ self.salt),
            None => self.draws.next(),
        };
        below(draw, self.threshold)
    }
}

/// `ratio` (0.0..=1.0) of the u64 range; 1.0 and above is `u64::MAX`, which
/// [`below`] treats as "always".
pub(crate) fn share(ratio: f64) -> u64 {
    if ratio.is_nan() || ratio <= 0.0 {
        0
    } else if ratio >= 1.0 {
        u64::MAX
    } else {
        (ratio * 18_446_744_073_709_551_616.0) as u64
    }
}

pub(crate) fn below(draw: u64, threshold: u64) -> bool {
    threshold == u64::MAX || draw < threshold
}

/// A SplitMix64 stream shared by all the requests of a sampler: the `n`th
/// draw is `mix(offset + n·φ)`, so concurrent requests need only the counter.
#[derive(Debug)]
pub(crate) struct RandomStream {
    offset: u64,
    n: AtomicU64,
}

impl RandomStream {
    pub(crate) fn new(offset: u64) -> RandomStream {
        RandomStream {
            offset,
            n: AtomicU64::new(0),
        }
    }

    pub(crate) fn next(&self) -> u64 {
        let n = self.n.fetch_add(1, Ordering::Relaxed);
        mix64(self.offset.wrapping_add(n.wrapping_mul(GOLDEN)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_about_the_percent_of_independent_requests() {
        let sampler = SessionSampler::new(25.0, 7, 1);
        let kept = (0..100_000).filter(|_| sampler.keeps(None)).count();
        // Binomial(100 000, 0.25): sd 137, so 6 sd either side.
        assert!((24_180..=25_820).contains(&kept), "kept {kept}");
    }

    #[test]
    fn a_session_is_kept_whole_and_sessions_at_the_percent() {
        let sampler = SessionSampler::new(10.0, 7, 1);
        let mut kept = 0;
        for s in 0..20_000 {
            let key = format!("session-{s}");
            let first = sampler.keeps(Some(key.as_bytes()));
            for _ in 0..3 {
                assert_eq!(sampler.keeps(Some(key.as_bytes())), first);
            }
            kept += usize::from(first);
        }
        // Binomial(20 000, 0.1): sd 42.
        assert!((1_750..=2_250).contains(&kept), "kept {kept}");
    }

    #[test]
    fn salts_choose_independently() {
        let mirror = SessionSampler::new(50.0, 1, 11);
        let recorder = SessionSampler::new(50.0, 1, 12);
        let both = (0..10_000)
            .map(|s| format!("s{s}"))
            .filter(|k| mirror.keeps(Some(k.as_bytes())) && recorder.keeps(Some(k.as_bytes())))
            .count();
        // Independent: a quarter (sd 43); the same salt would give a half.
        assert!((2_300..=2_700).contains(&both), "both {both}");
    }

    #[test]
    fn zero_and_hundred_are_exact() {
        let none = SessionSampler::new(0.0, 3, 1);
        let all = SessionSampler::new(100.0, 3, 1);
        for i in 0..1000u32 {
            let key = i.to_le_bytes();
            assert!(!none.keeps(Some(&key)) && !none.keeps(None));
            assert!(all.keeps(Some(&key)) && all.keeps(None));
        }
    }
}
