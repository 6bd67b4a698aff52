//! Adaptive shedding, the pure part: the signals and their bounds, the
//! level state machine with its hysteresis, the admission of a request by
//! its priority's rank against the level, and the body of the 503. The
//! control plane reads the signals and keeps time; the proxy admits.
//!
//! Levels: 0 sheds nothing; level `n` sheds the `n` lowest priorities. The
//! highest priority is never shed, so the level stops at `priorities − 1`.

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
    /// How long every signal must stay at or below its bound × `recovery`
    /// before one level is restored.
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
    pub from: u8,
    pub to: u8,
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

/// One route's shedding level over time. A breach raises the level by one
/// per evaluation (up to the highest); the level comes down by one only
/// after every signal has stayed at or below its bound × recovery for
/// `hold`, and another `hold` is needed for each further level. A breach
/// within a hold of a restore (the restored traffic overloads again)
/// doubles the hold, up to [`MAX_HOLD_FACTOR`] times; a breach after a
/// longer calm starts again from `hold`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shedder {
    level: u8,
    /// Since when every signal has been calm; `None` while not.
    calm_since_ms: Option<u64>,
    /// The last restore of a level.
    lowered_at_ms: Option<u64>,
    hold_factor: u64,
}

impl Default for Shedder {
    fn default() -> Self {
        Shedder {
            level: 0,
            calm_since_ms: None,
            lowered_at_ms: None,
            hold_factor: 1,
        }
    }
}

impl Shedder {
    pub fn level(&self) -> u8 {
        self.level
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
        let from = self.level;
        match verdict {
            Verdict::Breached => {
                self.calm_since_ms = None;
                if self.level < policy.max_level {
                    let hold = self.hold_ms(policy);
                    let flapped = self
                        .lowered_at_ms
                        .is_some_and(|t| now_ms.saturating_sub(t) < hold);
                    self.hold_factor = match flapped {
                        true => (self.hold_factor * 2).min(MAX_HOLD_FACTOR),
                        false => 1,
                    };
                    self.level += 1;
                }
            }
            Verdict::Holding => self.calm_since_ms = None,
            Verdict::Calm => {
                let since = *self.calm_since_ms.get_or_insert(now_ms);
                if self.level > 0 && now_ms.saturating_sub(since) >= self.hold_ms(policy) {
                    self.level -= 1;
                    self.lowered_at_ms = Some(now_ms);
                    // The next level down needs a hold of its own.
                    self.calm_since_ms = Some(now_ms);
                }
            }
        }
        (self.level != from).then(|| LevelChange {
            from,
            to: self.level,
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

/// Whether a request of priority `rank` among `levels` priorities is shed
/// at `level`: the `level` lowest priorities are.
pub fn is_shed(rank: usize, levels: usize, level: u8) -> bool {
    level > 0 && rank + usize::from(level) >= levels
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
