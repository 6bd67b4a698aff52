//! What a run measured so far, for the progress display and
//! `--report-to`: lock-free log-linear histograms of the gate measures,
//! filled as each request ends (warm-up left out), with the same
//! definitions as the result's (TTFT and the response time from the
//! intended start). Quantiles are within [`RELATIVE_ERROR`]; the result
//! file's HDR histograms stay the exact record.

use std::sync::atomic::{AtomicU64, Ordering};

use sluice_filters::Gate;

use crate::load::client::{Failure, Outcome};

/// Values below this (µs) have a bucket each.
const LINEAR: u64 = 64;
/// Buckets per power of two above it: 32, so a bucket spans at most 1/32
/// of its value.
const SUB_BITS: u32 = 5;
/// Powers of two from 2^6 µs to 2^42 µs (about 51 days); larger values go
/// to the last bucket.
const OCTAVES: u32 = 36;
const BUCKETS: usize = LINEAR as usize + ((OCTAVES as usize) << SUB_BITS);
/// The most a quantile read here is off from the exact one, relative.
pub const RELATIVE_ERROR: f64 = 1.0 / 32.0;

/// One measure's counts.
#[derive(Debug)]
pub struct LiveHistogram {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
}

impl Default for LiveHistogram {
    fn default() -> LiveHistogram {
        LiveHistogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
        }
    }
}

fn bucket(us: u64) -> usize {
    if us < LINEAR {
        return us as usize;
    }
    let octave = 63 - us.leading_zeros() - 6;
    if octave >= OCTAVES {
        return BUCKETS - 1;
    }
    let sub = (us >> (octave + 6 - SUB_BITS)) & ((1 << SUB_BITS) - 1);
    LINEAR as usize + ((octave as usize) << SUB_BITS) + sub as usize
}

/// The middle of bucket `i`, µs.
fn middle(i: usize) -> f64 {
    if i < LINEAR as usize {
        return i as f64;
    }
    let k = i - LINEAR as usize;
    let octave = (k >> SUB_BITS) as u32;
    let sub = (k & ((1 << SUB_BITS) - 1)) as u64;
    let width = 1u64 << (octave + 6 - SUB_BITS);
    let low = (1u64 << (octave + 6)) + sub * width;
    low as f64 + width as f64 / 2.0
}

impl LiveHistogram {
    pub fn record(&self, us: u64) {
        if let Some(b) = self.buckets.get(bucket(us)) {
            b.fetch_add(1, Ordering::Relaxed);
            self.count.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Quantile `q` in ms, `None` without samples.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(middle(i) / 1000.0);
            }
        }
        None
    }
}

/// The gate measures of the requests ended so far.
#[derive(Debug, Default)]
pub struct LiveMeasures {
    /// Measured requests (warm-up left out) that ended.
    pub requests: AtomicU64,
    /// Of them, failed for a reason other than 429.
    pub errors: AtomicU64,
    pub ttft: LiveHistogram,
    /// The sum of the TTFTs recorded, µs: with the count, the mean over
    /// any interval (the capacity search's early stop reads its trend).
    pub ttft_sum_us: AtomicU64,
    pub itl: LiveHistogram,
    pub tpot: LiveHistogram,
    pub e2el: LiveHistogram,
}

impl LiveMeasures {
    /// Counts one request that ended.
    pub fn observe(&self, o: &Outcome) {
        if o.warmup {
            return;
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        match o.failure {
            None => {}
            Some(Failure::RateLimited) => return,
            Some(_) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        self.e2el.record(o.e2el_us());
        if let Some(t) = o.ttft_us() {
            self.ttft.record(t);
            self.ttft_sum_us.fetch_add(t, Ordering::Relaxed);
        }
        if let Some(t) = o.tpot_us() {
            self.tpot.record(t);
        }
        for g in &o.gaps_us {
            self.itl.record(*g);
        }
    }

    /// Percent of the measured requests that failed (429s apart).
    pub fn error_rate(&self) -> Option<f64> {
        let n = self.requests.load(Ordering::Relaxed);
        (n > 0).then(|| 100.0 * self.errors.load(Ordering::Relaxed) as f64 / n as f64)
    }

    /// A run-wide gate's value so far, as the result judges it at the end;
    /// `None` when not measured (yet).
    pub fn gate_value(&self, gate: Gate) -> Option<f64> {
        match gate {
            Gate::TtftP95 => self.ttft.quantile_ms(0.95),
            Gate::TtftP99 => self.ttft.quantile_ms(0.99),
            Gate::GapP99 => self.itl.quantile_ms(0.99),
            Gate::TpotP95 => self.tpot.quantile_ms(0.95),
            Gate::LatencyP99 => self.e2el.quantile_ms(0.99),
            Gate::ErrorRate => self.error_rate(),
            Gate::P99VsStable
            | Gate::TtftVsStable
            | Gate::GpuMemoryMax
            | Gate::UpstreamQueueMax
            | Gate::CostPer1kMax
            | Gate::GrpcSuccessRateMin
            | Gate::EmbeddingSimilarityP10Min
            | Gate::EmbeddingDriftKlMax
            | Gate::AnswerDispersionMax
            | Gate::MinCoverage => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rand::{Rng, SeedableRng};
    use rand_distr::{Distribution, LogNormal};

    use super::*;

    #[test]
    fn every_value_falls_in_a_bucket_that_holds_it_within_the_error() {
        for us in (0..20_000u64).chain([1 << 20, (1 << 30) + 12_345, u64::from(u32::MAX)]) {
            let i = bucket(us);
            assert!(i < BUCKETS);
            let m = middle(i);
            assert!(
                (m - us as f64).abs() <= (us as f64 * RELATIVE_ERROR / 2.0).max(0.0) + 1e-9,
                "{us} -> bucket {i} middle {m}"
            );
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_of_a_seeded_lognormal_match_the_exact_ones() {
        // TTFTs around 200 ms with a long tail: median e^12.2 µs, sigma 0.8.
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let dist = LogNormal::new(12.2, 0.8).unwrap();
        let h = LiveHistogram::default();
        let mut all: Vec<u64> = (0..50_000)
            .map(|_| dist.sample(&mut rng) as u64 + rng.random_range(0..2))
            .collect();
        for v in &all {
            h.record(*v);
        }
        all.sort_unstable();
        for q in [0.5, 0.95, 0.99] {
            let exact = all[((q * all.len() as f64).ceil() as usize) - 1] as f64 / 1000.0;
            let read = h.quantile_ms(q).unwrap();
            assert!(
                (read - exact).abs() <= exact * RELATIVE_ERROR,
                "q {q}: {read} vs {exact}"
            );
        }
        assert_eq!(h.count(), 50_000);
        assert_eq!(LiveHistogram::default().quantile_ms(0.5), None);
    }

    #[test]
    fn measures_follow_the_results_definitions() {
        let m = LiveMeasures::default();
        let ok = Outcome {
            intended_us: 1_000,
            sent_us: 1_500,
            first_content_us: Some(51_000),
            end_us: 151_000,
            output_tokens: Some(11),
            gaps_us: vec![10_000; 10],
            ..Outcome::default()
        };
        m.observe(&ok);
        m.observe(&Outcome {
            warmup: true,
            failure: Some(Failure::Status),
            ..Outcome::default()
        });
        m.observe(&Outcome {
            failure: Some(Failure::RateLimited),
            ..Outcome::default()
        });
        m.observe(&Outcome {
            failure: Some(Failure::Timeout),
            ..Outcome::default()
        });
        // TTFT from the intended start: 50 ms; TPOT 100 ms / 10.
        let close = |v: Option<f64>, want: f64| (v.unwrap() - want).abs() <= want / 32.0;
        assert!(close(m.gate_value(Gate::TtftP95), 50.0));
        assert_eq!(m.ttft_sum_us.load(Ordering::Relaxed), 50_000);
        assert!(close(m.gate_value(Gate::TpotP95), 10.0));
        assert!(close(m.gate_value(Gate::GapP99), 10.0));
        assert!(close(m.gate_value(Gate::LatencyP99), 150.0));
        // 3 measured, 1 error: the 429 counts as a request, not an error.
        assert_eq!(m.gate_value(Gate::ErrorRate), Some(100.0 / 3.0));
        assert_eq!(m.gate_value(Gate::GpuMemoryMax), None);
    }
}
