//! Adaptive shedding, the pure part: the signals and their bounds, the
//! level state machine with its hysteresis, the admission of a request by
//! its priority's rank against the level, and the body of the 503. The
//! control plane reads the signals and keeps time; the proxy admits.
//!
//! Levels: 0 sheds nothing; level `n` sheds the `n` lowest priorities. The
//! highest priority is never shed, so the level stops at `priorities − 1`.
//! A level is taken whole at a breach, and given back in `steps` steps (at
//! level 0.75 a quarter of the lowest priority is let through): a restore is
//! a probe of the server, and a small probe that overloads it hurts the
//! priorities above far less than the whole class at once.

mod metrics;

pub use metrics::{SheddingMetrics, SheddingRouteMetrics};

use serde::Serialize;

/// One live signal of a cluster that shedding watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Signal {
    /// The P99 cost per output token over its calm baseline, ms per token
    /// (`sluice_filters::token_cost_excess`).
    TokenCostExcessP99,
    /// Time to first token, p95, ms.
    TtftP95,
    /// Requests waiting at the model servers (their own queue gauge).
    Queue,
    /// Memory used on the fullest GPU, percent.
    GpuMemory,
}

impl Signal {
    pub const ALL: [Signal; 4] = [
        Signal::TokenCostExcessP99,
        Signal::TtftP95,
        Signal::Queue,
        Signal::GpuMemory,
    ];

    /// The config key and the event's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::TokenCostExcessP99 => "token_cost_excess_p99",
            Signal::TtftP95 => "ttft_p95",
            Signal::Queue => "queue",
            Signal::GpuMemory => "gpu_memory",
        }
    }

    /// For people: whole ms of TTFT, thousandths of a ms per token.
    fn show(self, v: f64) -> String {
        let round = |v: f64, scale: f64| (v * scale).round() / scale;
        match self {
            Signal::TokenCostExcessP99 => format!("{}ms/token", round(v, 1000.0)),
            Signal::TtftP95 => format!("{}ms", round(v, 1.0)),
            Signal::Queue => format!("{}", round(v, 10.0)),
            Signal::GpuMemory => format!("{}%", round(v, 10.0)),
        }
    }
}

/// A value per signal: the bounds of a route (`None`: not watched), or one
/// evaluation's readings (`None`: nothing to read, which counts as calm).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Signals {
    pub token_cost_excess_p99: Option<f64>,
    pub ttft_p95: Option<f64>,
    pub queue: Option<f64>,
    pub gpu_memory: Option<f64>,
}

impl Signals {
    pub fn get(&self, signal: Signal) -> Option<f64> {
        match signal {
            Signal::TokenCostExcessP99 => self.token_cost_excess_p99,
            Signal::TtftP95 => self.ttft_p95,
            Signal::Queue => self.queue,
            Signal::GpuMemory => self.gpu_memory,
        }
    }

    /// The signals that have a value, in [`Signal::ALL`] order.
    pub fn set(&self) -> impl Iterator<Item = (Signal, f64)> + '_ {
        Signal::ALL
            .into_iter()
            .filter_map(|s| Some((s, self.get(s)?)))
    }
}

/// A route's shedding rule, as the state machine needs it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShedPolicy {
    /// At least one set.
    pub bounds: Signals,
    /// The highest level: the number of priorities less one.
    pub max_level: u8,
    /// Restore steps per level (at least 1): each restores 1/steps of it.
    pub steps: u8,
    /// How long every signal must stay at or below its bound × `recovery`
    /// before one step is restored.
    pub hold_ms: u64,
    /// The share (0 < r ≤ 1) of each bound that a signal must fall to for
    /// the route to count as recovered: between it and the bound the level
    /// holds (the hysteresis band).
    pub recovery: f64,
}

/// One signal at one evaluation: the evidence of a level change.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Evidence {
    pub signal: Signal,
    /// `None`: nothing to read (too few samples, no scrape).
    pub value: Option<f64>,
    pub bound: f64,
    /// Over its bound.
    pub breached: bool,
}

impl ShedPolicy {
    /// The highest level in steps.
    pub fn max_units(&self) -> u16 {
        u16::from(self.max_level) * u16::from(self.steps.max(1))
    }

    /// `units` (steps) as a level: 3 steps of 4 is 0.75.
    pub fn level(&self, units: u16) -> f64 {
        f64::from(units) / f64::from(self.steps.max(1))
    }
}

impl Evidence {
    /// `ttft_p95 912ms > 500ms`, `queue 3 <= 16`, `gpu_memory n/a vs 95%`.
    pub fn describe(&self) -> String {
        let s = self.signal;
        match self.value {
            Some(v) => format!(
                "{} {} {} {}",
                s.as_str(),
                s.show(v),
                if self.breached { ">" } else { "<=" },
                s.show(self.bound)
            ),
            None => format!("{} n/a vs {}", s.as_str(), s.show(self.bound)),
        }
    }
}

/// What one evaluation found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A signal is over its bound.
    Breached,
    /// None over, but one above its bound × recovery: the level holds.
    Holding,
    /// Every signal at or below its bound × recovery (or nothing to read).
    Calm,
}

/// Judges `readings` against the policy's bounds; the evidence lists every
/// watched signal.
pub fn judge(policy: &ShedPolicy, readings: &Signals) -> (Verdict, Vec<Evidence>) {
    let mut verdict = Verdict::Calm;
    let evidence = policy
        .bounds
        .set()
        .map(|(signal, bound)| {
            let value = readings.get(signal).filter(|v| v.is_finite());
            let breached = value.is_some_and(|v| v > bound);
            if breached {
                verdict = Verdict::Breached;
            } else if value.is_some_and(|v| v > bound * policy.recovery) && verdict == Verdict::Calm
            {
                verdict = Verdict::Holding;
            }
            Evidence {
                signal,
                value,
                bound,
                breached,
            }
        })
        .collect();
    (verdict, evidence)
}

/// A change of level, with what caused it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LevelChange {
    /// Levels (0.75: three quarters of the lowest priority shed).
    pub from: f64,
    pub to: f64,
    /// The new level in steps, as the proxy reads it.
    #[serde(skip)]
    pub units: u16,
    /// Every watched signal as read at the change.
    pub evidence: Vec<Evidence>,
}

impl LevelChange {
    /// `shedding level 0 -> 1: ttft_p95 912ms > 500ms; queue 3 <= 16`.
    pub fn describe(&self) -> String {
        let each: Vec<String> = self.evidence.iter().map(Evidence::describe).collect();
        format!(
            "shedding level {} -> {}: {}",
            self.from,
            self.to,
            each.join("; ")
        )
    }
}

/// The most a flapping route's hold is stretched: 8 × `hold`.
pub const MAX_HOLD_FACTOR: u64 = 8;

/// One route's shedding level over time, in steps. A breach raises the
/// level to the next whole one per evaluation (up to the highest); the
/// level comes down by one step only after every signal has stayed at or
/// below its bound × recovery for `hold`, and another `hold` is needed for
/// each further step. A breach within a hold of a restore (the restored
/// traffic overloads again) doubles the hold, up to [`MAX_HOLD_FACTOR`]
/// times; a breach after a longer calm starts again from `hold`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shedder {
    units: u16,
    /// Since when every signal has been calm; `None` while not.
    calm_since_ms: Option<u64>,
    /// The last restore of a step.
    lowered_at_ms: Option<u64>,
    hold_factor: u64,
}

impl Default for Shedder {
    fn default() -> Self {
        Shedder {
            units: 0,
            calm_since_ms: None,
            lowered_at_ms: None,
            hold_factor: 1,
        }
    }
}

impl Shedder {
    /// The level in steps.
    pub fn units(&self) -> u16 {
        self.units
    }

    /// The hold the next restore waits for, ms.
    pub fn hold_ms(&self, policy: &ShedPolicy) -> u64 {
        policy.hold_ms.saturating_mul(self.hold_factor)
    }

    /// One evaluation at `now_ms` (a monotonic clock's milliseconds).
    pub fn step(
        &mut self,
        policy: &ShedPolicy,
        readings: &Signals,
        now_ms: u64,
    ) -> Option<LevelChange> {
        let (verdict, evidence) = judge(policy, readings);
        let from = self.units;
        let steps = u16::from(policy.steps.max(1));
        match verdict {
            Verdict::Breached => {
                self.calm_since_ms = None;
                if self.units < policy.max_units() {
                    let hold = self.hold_ms(policy);
                    let flapped = self
                        .lowered_at_ms
                        .is_some_and(|t| now_ms.saturating_sub(t) < hold);
                    self.hold_factor = match flapped {
                        true => (self.hold_factor * 2).min(MAX_HOLD_FACTOR),
                        false => 1,
                    };
                    // Up to the next whole level: a partial one was a probe.
                    self.units = ((self.units / steps + 1) * steps).min(policy.max_units());
                }
            }
            Verdict::Holding => self.calm_since_ms = None,
            Verdict::Calm => {
                let since = *self.calm_since_ms.get_or_insert(now_ms);
                if self.units > 0 && now_ms.saturating_sub(since) >= self.hold_ms(policy) {
                    self.units -= 1;
                    self.lowered_at_ms = Some(now_ms);
                    // The next step down needs a hold of its own.
                    self.calm_since_ms = Some(now_ms);
                }
            }
        }
        (self.units != from).then(|| LevelChange {
            from: policy.level(from),
            to: policy.level(self.units),
            units: self.units,
            evidence,
        })
    }
}

/// The rank of a request's priority value among `levels` (highest first);
/// a value that names none of them, or none at all, gets `default`.
pub fn priority_rank(levels: &[String], value: Option<&[u8]>, default: usize) -> usize {
    value
        .and_then(|v| levels.iter().position(|l| l.as_bytes() == v))
        .unwrap_or(default)
}

/// The share (0..=1) of the requests of priority `rank` among `levels`
/// priorities that are shed at `units` steps of `steps` a level: the lowest
/// priority takes the first `steps`, the next the following ones.
pub fn shed_share(rank: usize, levels: usize, units: u16, steps: u8) -> f64 {
    let steps = u64::from(steps.max(1));
    let above_lowest = levels.saturating_sub(rank + 1) as u64;
    let over = u64::from(units)
        .saturating_sub(above_lowest * steps)
        .min(steps);
    over as f64 / steps as f64
}

/// Whether one request of priority `rank` is shed at `units`: always at a
/// share of 1, never at 0, else when `random` (uniform over `u64`) falls in
/// the share.
pub fn is_shed(rank: usize, levels: usize, units: u16, steps: u8, random: u64) -> bool {
    let share = shed_share(rank, levels, units, steps);
    share >= 1.0 || (share > 0.0 && ((random >> 11) as f64) < share * (1u64 << 53) as f64)
}

/// The body of a shed request's 503, in the OpenAI error shape (the SDKs
/// raise `InternalServerError` and retry after `retry-after`).
pub fn shed_body(priority: &str, retry_after_ms: u64) -> String {
    let message = format!(
        "The service is overloaded and sheds `{priority}` traffic for now. Please try again in {}.",
        crate::format_reset(retry_after_ms)
    );
    serde_json::json!({
        "error": {
            "message": message,
            "type": "server_error",
            "param": null,
            "code": "overloaded",
        }
    })
    .to_string()
}

#[cfg(test)]
mod tests;
