//! The joint decision: each stage's three signals as margins to their
//! bounds, `m = (bound − value) / bound` clipped to [−1, 1] (for the knee,
//! the distance below the knee's rate as a share of it), weighted into one
//! score. The recommended rate is the highest probed rate whose score is
//! ≥ 0 and whose hard SLAs all hold, with one sentence on what binds it.

use serde::Serialize;
use sluice_filters::{Gate, GateUnit};

/// The default bound on the P99 sensitivity's excess, ms per token.
pub const DEFAULT_SLOPE_BOUND_MS: f64 = sluice_filters::DEFAULT_EXCESS_BOUND_MS;

/// The weights of the P99 sensitivity, the knee and the cost.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Weights {
    pub p99: f64,
    pub knee: f64,
    pub cost: f64,
}

impl Weights {
    /// A fraud-check API: latency first.
    pub const LATENCY_CRITICAL: Weights = Weights {
        p99: 0.55,
        knee: 0.30,
        cost: 0.15,
    };
    /// Content generation: throughput first.
    pub const GENERATION: Weights = Weights {
        p99: 0.25,
        knee: 0.50,
        cost: 0.25,
    };

    /// `latency_critical`, `generation`, or `p99=0.5,knee=0.3,cost=0.2`
    /// (any left out weigh 0; they need not sum to 1).
    pub fn parse(text: &str) -> Result<Weights, String> {
        match text {
            "latency_critical" => return Ok(Weights::LATENCY_CRITICAL),
            "generation" => return Ok(Weights::GENERATION),
            _ => {}
        }
        let mut w = Weights {
            p99: 0.0,
            knee: 0.0,
            cost: 0.0,
        };
        for item in text.split(',').map(str::trim) {
            let (key, value) = item.split_once('=').ok_or_else(|| {
                format!("`{item}`: expected latency_critical, generation or weights like p99=0.5,knee=0.3,cost=0.2")
            })?;
            let v: f64 = match value.trim().parse() {
                Ok(v) if f64::is_finite(v) && v >= 0.0 => v,
                _ => return Err(format!("`{item}`: `{value}` is not a weight ≥ 0")),
            };
            match key.trim() {
                "p99" => w.p99 = v,
                "knee" => w.knee = v,
                "cost" => w.cost = v,
                other => {
                    return Err(format!(
                        "`{item}`: unknown signal `{other}` (expected p99, knee or cost)"
                    ))
                }
            }
        }
        if w.p99 + w.knee + w.cost <= 0.0 {
            return Err(format!("`{text}`: the weights sum to 0"));
        }
        Ok(w)
    }
}

/// One hard SLA at one stage.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SlaCheck {
    pub gate: Gate,
    /// `None`: nothing measured it (no streamed answer for a TTFT gate);
    /// it then does not hold.
    pub value: Option<f64>,
    pub bound: f64,
    pub passed: bool,
}

/// What the decision reads of one stage.
#[derive(Clone, Debug, PartialEq)]
pub struct StageSignals {
    /// Offered, req/s.
    pub rate: f64,
    pub p99_excess_ms_per_token: Option<f64>,
    pub cost_per_1k: Option<f64>,
    pub sla: Vec<SlaCheck>,
    /// Why the stage was cut short (`over_saturated`), if it was: such a
    /// stage did not hold, whatever its SLAs read over the part that ran.
    pub early_stop: Option<&'static str>,
}

impl StageSignals {
    /// Whether the stage held: it ran to its end, every SLA held, and its
    /// cost was within the hard bound when one is given.
    pub(crate) fn held(&self, bounds: &Bounds) -> bool {
        let cost_ok = match (bounds.cost_per_1k_max, self.cost_per_1k) {
            (Some(max), Some(v)) => v <= max,
            _ => true,
        };
        self.early_stop.is_none() && cost_ok && self.sla.iter().all(|c| c.passed)
    }
}

/// The bounds of the soft signals.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Bounds {
    pub p99_excess_ms_per_token: f64,
    pub cost_per_1k_max: Option<f64>,
}

/// A stage's margins and score. A signal with nothing to read (no price
/// table, too few requests for a slope) is left out and the others'
/// weights scaled up to the same sum.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Scored {
    pub p99_margin: Option<f64>,
    pub knee_margin: f64,
    pub cost_margin: Option<f64>,
    pub score: f64,
}

/// `(bound − value) / bound`, clipped to [−1, 1].
pub fn margin(bound: f64, value: f64) -> f64 {
    ((bound - value) / bound).clamp(-1.0, 1.0)
}

/// The stage's score. `knee` is the knee's rate; without one (the curve
/// never bent in the probed range) the highest probed rate stands in,
/// since the knee lies at or beyond it: a conservative margin.
pub fn score(stage: &StageSignals, knee: f64, bounds: &Bounds, w: &Weights) -> Scored {
    let p99_margin = stage
        .p99_excess_ms_per_token
        .map(|v| margin(bounds.p99_excess_ms_per_token, v));
    let cost_margin = match (stage.cost_per_1k, bounds.cost_per_1k_max) {
        (Some(v), Some(bound)) => Some(margin(bound, v)),
        _ => None,
    };
    let knee_margin = ((knee - stage.rate) / knee).clamp(-1.0, 1.0);
    let parts = [
        (w.p99, p99_margin),
        (w.knee, Some(knee_margin)),
        (w.cost, cost_margin),
    ];
    let total: f64 = parts.iter().map(|p| p.0).sum();
    let present: f64 = parts.iter().filter(|p| p.1.is_some()).map(|p| p.0).sum();
    let weighted: f64 = parts.iter().filter_map(|p| p.1.map(|m| p.0 * m)).sum();
    let score = if present > 0.0 {
        weighted * total / present
    } else {
        0.0
    };
    Scored {
        p99_margin,
        knee_margin,
        cost_margin,
        score,
    }
}

/// The answer of the search.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Recommendation {
    /// The highest probed rate at which every stage held every SLA.
    pub max_rate: Option<f64>,
    /// The highest of those whose score is also ≥ 0.
    pub recommended_rate: Option<f64>,
    /// What binds it, in one sentence.
    pub binding: String,
}

/// The recommendation over every stage (in any order; stages of one rate
/// must all hold).
pub fn recommend(
    stages: &[(StageSignals, Scored)],
    knee: Option<f64>,
    bounds: &Bounds,
) -> Recommendation {
    let mut rates: Vec<f64> = stages.iter().map(|s| s.0.rate).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    let at = |r: f64| stages.iter().filter(move |s| s.0.rate == r);
    let holds = |r: f64| at(r).all(|s| s.0.held(bounds));
    let scores_ok = |r: f64| at(r).all(|s| s.1.score >= 0.0);
    let max_rate = rates.iter().rev().copied().find(|&r| holds(r));
    let recommended = rates
        .iter()
        .rev()
        .copied()
        .find(|&r| holds(r) && scores_ok(r));
    let above = |r: f64| rates.iter().copied().find(|&x| x > r);
    let binding = match recommended {
        None => match rates.first() {
            None => "nothing was probed".to_owned(),
            Some(&low) => format!(
                "no probed rate qualifies: at the lowest, {}, {}",
                req_s(low),
                why_not(at(low), knee, bounds)
            ),
        },
        Some(r) => match above(r) {
            None => format!(
                "{} is the highest rate probed, and it holds every SLA with a score ≥ 0",
                req_s(r)
            ),
            Some(next) => format!(
                "{} is the highest that qualifies: at {}, {}",
                req_s(r),
                req_s(next),
                why_not(at(next), knee, bounds)
            ),
        },
    };
    Recommendation {
        max_rate,
        recommended_rate: recommended,
        binding,
    }
}

/// Why a rate does not qualify: its first failed SLA, else the signal
/// that pulls its score lowest.
fn why_not<'a>(
    mut stages: impl Iterator<Item = &'a (StageSignals, Scored)> + Clone,
    knee: Option<f64>,
    bounds: &Bounds,
) -> String {
    if let Some(why) = stages.clone().find_map(|s| s.0.early_stop) {
        return format!(
            "the stage was stopped early ({}): its backlog grew without bound",
            why.replace('_', "-")
        );
    }
    let failed = stages
        .clone()
        .find_map(|s| s.0.sla.iter().find(|c| !c.passed));
    let over_cost = |s: &&(StageSignals, Scored)| matches!((bounds.cost_per_1k_max, s.0.cost_per_1k), (Some(max), Some(v)) if v > max);
    if let (None, Some(s)) = (failed, stages.clone().find(over_cost)) {
        return format!(
            "1k tokens cost ${:.4}, over its ${:.4} bound",
            s.0.cost_per_1k.unwrap_or(0.0),
            bounds.cost_per_1k_max.unwrap_or(0.0)
        );
    }
    if let Some(c) = failed {
        return match c.value {
            Some(v) => format!(
                "{} was {}, over its {} SLA",
                c.gate.as_str(),
                value(c.gate, v),
                value(c.gate, c.bound)
            ),
            None => format!("{} had nothing to measure it", c.gate.as_str()),
        };
    }
    let Some((s, scored)) = stages.find(|s| s.1.score < 0.0) else {
        return "it holds".to_owned();
    };
    let worst = [
        scored.p99_margin.map(|m| (m, "p99")),
        Some((scored.knee_margin, "knee")),
        scored.cost_margin.map(|m| (m, "cost")),
    ]
    .into_iter()
    .flatten()
    .min_by(|a, b| a.0.total_cmp(&b.0));
    match worst {
        Some((_, "p99")) => format!(
            "load adds {:.2} ms per output token to P99, over its {:.2} bound (score {:.2})",
            s.p99_excess_ms_per_token.unwrap_or(0.0),
            bounds.p99_excess_ms_per_token,
            scored.score
        ),
        Some((_, "cost")) => format!(
            "1k tokens cost ${:.4}, over its ${:.4} bound (score {:.2})",
            s.cost_per_1k.unwrap_or(0.0),
            bounds.cost_per_1k_max.unwrap_or(0.0),
            scored.score
        ),
        _ => match knee {
            Some(k) => format!(
                "it is {:.0}% past the throughput knee at {} (score {:.2})",
                -100.0 * scored.knee_margin,
                req_s(k),
                scored.score
            ),
            None => format!("the score is {:.2}", scored.score),
        },
    }
}

fn req_s(rate: f64) -> String {
    format!("{rate:.1} req/s")
}

fn value(gate: Gate, v: f64) -> String {
    match gate.unit() {
        GateUnit::Ms => format!("{v:.0} ms"),
        GateUnit::Percent => format!("{v:.2}%"),
        GateUnit::Ratio => format!("{v:.2}"),
        GateUnit::Requests => format!("{v:.0}"),
        GateUnit::Usd => format!("${v:.5}"),
    }
}

#[cfg(test)]
mod tests;
