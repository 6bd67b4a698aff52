//! The schedule of a load run: every intended start time, made up front
//! from the seed and never rescaled (wrk2's rule: latency is measured from
//! these times, so a slow target cannot slow the schedule down).
//!
//! The gaps come from the arrival process at unit rate (each gap divided by
//! the process's mean), which gives *operational* times τ₁ < τ₂ < ….
//! The rate over time λ(t) (a constant, stages with linear ramps, or a
//! fitted rate curve) is applied by *time rescaling*: the k-th arrival is
//! at t with Λ(t) = τₖ, where Λ(t) = ∫₀ᵗ λ. With a constant rate equal to
//! the process's own rate this is the process itself; with a varying rate
//! it keeps the process's burstiness (its CV) while following λ. Λ is
//! piecewise quadratic, inverted in closed form: no thinning, no rejected
//! draws, so the same seed gives the same times whatever the rates.
//!
//! Shards: arrival k belongs to shard k mod n, so n shards together are
//! exactly the one schedule and each carries 1/n of every stage's load.
//!
//! Pure: the caller passes the seed; nothing here reads a clock.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Gamma, StandardNormal};
use sluice_filters::Arrival;
use statrs::function::gamma::gamma;

/// The most arrivals one schedule may hold: every loop here is bounded.
pub const MAX_ARRIVALS: usize = 10_000_000;

/// The shape of the gaps between arrivals.
#[derive(Clone, Debug, PartialEq)]
pub enum Process {
    /// Evenly spaced: every gap is the mean.
    Constant,
    /// Independent gaps from the distribution (a renewal process).
    Renewal(Arrival),
}

impl Process {
    /// The process's own mean gap in seconds (`None` for `Constant`, whose
    /// rate is always given).
    pub fn mean_gap_s(&self) -> Option<f64> {
        match self {
            Process::Constant => None,
            Process::Renewal(a) => Some(mean_gap_s(a)),
        }
    }

    /// The process's own rate per second, 1 / mean gap.
    pub fn rate(&self) -> Option<f64> {
        self.mean_gap_s().map(|m| 1.0 / m)
    }
}

/// E[gap] of an arrival distribution, in seconds.
pub fn mean_gap_s(a: &Arrival) -> f64 {
    match a {
        Arrival::Exponential { rate } => 1.0 / rate,
        Arrival::Gamma { shape, scale } => shape * scale,
        Arrival::Weibull { shape, scale } => scale * gamma(1.0 + 1.0 / shape),
        Arrival::Lognormal { mu, sigma } => (mu + sigma * sigma / 2.0).exp(),
        Arrival::WeibullMixture { components } => components
            .iter()
            .map(|c| c.weight * c.scale * gamma(1.0 + 1.0 / c.shape))
            .sum(),
    }
}

/// A span of the rate over time: linear from `from` to `to` arrivals per
/// second over `span`. `stage` names the stage it belongs to (its index).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Segment {
    pub span: Duration,
    pub from: f64,
    pub to: f64,
    pub stage: usize,
}

/// What a schedule is made from.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub process: Process,
    /// Back to back from the run's start; their spans sum to the run.
    pub segments: Vec<Segment>,
    /// The first `warmup` of the run: its arrivals are sent and marked,
    /// and kept out of every summary.
    pub warmup: Duration,
    pub seed: u64,
}

/// One intended start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Intended {
    /// The arrival's index in the whole (unsharded) schedule.
    pub index: u64,
    /// Microseconds from the run's start.
    pub at_us: u64,
    pub stage: usize,
    pub warmup: bool,
}

/// The intended starts of one run (or one shard of it), in time order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub arrivals: Vec<Intended>,
    /// The length of the whole run, µs.
    pub span_us: u64,
}

/// Why a plan makes no schedule.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    #[error(
        "the schedule would hold more than {MAX_ARRIVALS} arrivals: lower the rate or the duration"
    )]
    TooMany,
    #[error("the rate {0} is not a finite number >= 0")]
    BadRate(f64),
}

impl Plan {
    /// The intended starts, from the seed.
    pub fn schedule(&self) -> Result<Schedule, ScheduleError> {
        for s in &self.segments {
            for r in [s.from, s.to] {
                if !(r.is_finite() && r >= 0.0) {
                    return Err(ScheduleError::BadRate(r));
                }
            }
        }
        let mut rng = StdRng::seed_from_u64(self.seed);
        let unit = UnitGaps::new(&self.process);
        let span_us: u64 = self.segments.iter().map(|s| micros(s.span)).sum();
        let warmup_us = micros(self.warmup);
        let mut arrivals = Vec::new();
        let mut tau = 0.0_f64;
        // The segment τ falls in: its start (s) and Λ at its start.
        let (mut seg, mut seg_start_s, mut lambda_start) = (0usize, 0.0_f64, 0.0_f64);
        while let Some(s) = self.segments.get(seg) {
            tau += unit.draw(&mut rng);
            let length = s.span.as_secs_f64();
            let mut mass = (s.from + s.to) / 2.0 * length;
            let mut current = *s;
            // Move on to the segment that holds τ (bounded by their count).
            while tau > lambda_start + mass {
                lambda_start += mass;
                seg_start_s += current.span.as_secs_f64();
                seg += 1;
                match self.segments.get(seg) {
                    Some(next) => {
                        current = *next;
                        mass = (next.from + next.to) / 2.0 * next.span.as_secs_f64();
                    }
                    None => break,
                }
            }
            let Some(s) = self.segments.get(seg) else {
                break;
            };
            let within = invert(s, tau - lambda_start);
            let at_us = ((seg_start_s + within) * 1e6).round() as u64;
            if arrivals.len() >= MAX_ARRIVALS {
                return Err(ScheduleError::TooMany);
            }
            arrivals.push(Intended {
                index: arrivals.len() as u64,
                at_us: at_us.min(span_us),
                stage: s.stage,
                warmup: at_us < warmup_us,
            });
        }
        Ok(Schedule { arrivals, span_us })
    }
}

/// The time u within segment `s` at which Λ has grown by `delta` since its
/// start: r₀u + (r₁ − r₀)u²/(2L) = Δ, in the form that stays exact when
/// r₀ = 0 and when the ramp goes down.
fn invert(s: &Segment, delta: f64) -> f64 {
    let length = s.span.as_secs_f64();
    let a = (s.to - s.from) / (2.0 * length);
    let u = if a.abs() < 1e-12 {
        delta / s.from
    } else {
        let root = (s.from * s.from + 4.0 * a * delta).max(0.0).sqrt();
        2.0 * delta / (s.from + root)
    };
    if u.is_finite() {
        u.clamp(0.0, length)
    } else {
        length
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Gaps of the process divided by its mean: mean 1, the same CV.
enum UnitGaps {
    One,
    Exponential,
    Gamma(Gamma<f64>),
    Weibull {
        shape: f64,
        scale: f64,
    },
    Lognormal {
        mu: f64,
        sigma: f64,
    },
    /// (cumulative weight, shape, scale) each, scales already divided.
    Mixture(Vec<(f64, f64, f64)>),
}

impl UnitGaps {
    fn new(process: &Process) -> UnitGaps {
        let Process::Renewal(a) = process else {
            return UnitGaps::One;
        };
        let mean = mean_gap_s(a);
        match a {
            Arrival::Exponential { .. } => UnitGaps::Exponential,
            Arrival::Gamma { shape, .. } => match Gamma::new(*shape, 1.0 / shape) {
                Ok(g) => UnitGaps::Gamma(g),
                Err(_) => UnitGaps::One,
            },
            Arrival::Weibull { shape, scale } => UnitGaps::Weibull {
                shape: *shape,
                scale: scale / mean,
            },
            Arrival::Lognormal { mu, sigma } => UnitGaps::Lognormal {
                mu: mu - mean.ln(),
                sigma: *sigma,
            },
            Arrival::WeibullMixture { components } => {
                let mut total = 0.0;
                UnitGaps::Mixture(
                    components
                        .iter()
                        .map(|c| {
                            total += c.weight;
                            (total, c.shape, c.scale / mean)
                        })
                        .collect(),
                )
            }
        }
    }

    fn draw(&self, rng: &mut StdRng) -> f64 {
        // 1 − U is in (0, 1]: its logarithm is finite.
        let exp1 = |rng: &mut StdRng| -(1.0 - rng.random::<f64>()).ln();
        match self {
            UnitGaps::One => 1.0,
            UnitGaps::Exponential => exp1(rng),
            UnitGaps::Gamma(g) => g.sample(rng),
            UnitGaps::Weibull { shape, scale } => scale * exp1(rng).powf(1.0 / shape),
            UnitGaps::Lognormal { mu, sigma } => {
                let z: f64 = StandardNormal.sample(rng);
                (mu + sigma * z).exp()
            }
            UnitGaps::Mixture(parts) => {
                let total = parts.last().map_or(1.0, |p| p.0);
                let pick = rng.random::<f64>() * total;
                let (_, shape, scale) = parts
                    .iter()
                    .find(|p| pick < p.0)
                    .or(parts.last())
                    .copied()
                    .unwrap_or((1.0, 1.0, 1.0));
                scale * exp1(rng).powf(1.0 / shape)
            }
        }
    }
}

/// `--shard i/n`: the i-th (from 0) of n slices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };
}

impl FromStr for Shard {
    type Err = String;
    fn from_str(text: &str) -> Result<Shard, String> {
        let bad = || format!("`{text}` is not a shard like 0/4 (i/n, i counted from 0, i < n)");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Schedule {
    /// The arrivals of one shard: those whose index is `shard.index` mod
    /// `shard.count`, with their times and indices unchanged.
    pub fn shard(&self, shard: Shard) -> Schedule {
        let count = u64::from(shard.count.max(1));
        Schedule {
            arrivals: self
                .arrivals
                .iter()
                .filter(|a| a.index % count == u64::from(shard.index))
                .copied()
                .collect(),
            span_us: self.span_us,
        }
    }
}

#[cfg(test)]
mod tests;
