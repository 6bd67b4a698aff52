//! One stage of the search, measured: from the load run of the stage (its
//! outcomes and its summary with the SLAs judged as thresholds), the
//! achieved rates, the token throughput, the P99-per-token slope of the
//! model steps, the cost of 1k tokens, and the worst SLA margin that the
//! search steers by.

use rand::SeedableRng;
use serde::Serialize;
use sluice_filters::{slope_interval, slope_readable, Gate, TokenBin};

use super::score::{Scored, SlaCheck};
use super::signals::{model_signals, ModelSignals};
use crate::load::{Answer, Outcome, RunOutput, RunReport, Scenario};

/// Why a stage is a probe or a confirmation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    Probe,
    Confirm,
}

/// A stage, measured, as the capacity file keeps it.
#[derive(Clone, Debug, Serialize)]
pub struct StageResult {
    /// Offered arrivals (journeys) a second.
    pub rate: f64,
    pub purpose: Purpose,
    /// The measured part, s.
    pub duration_s: f64,
    /// Journeys started a second (the open loop keeps the offered rate
    /// unless the stage stopped early).
    pub achieved_rate: f64,
    /// Requests (every step) ended a second.
    pub request_rate: f64,
    /// Requests a measured journey sent (1 for a one-step scenario
    /// without sessions): arrivals a second times it is requests a second.
    pub requests_per_journey: f64,
    /// `over_saturated` when the backlog grew without bound and the
    /// stage was cut short.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub early_stop: Option<&'static str>,
    /// Output tokens a second, of the answered model requests.
    pub token_throughput: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// P99 E2E against output tokens of the model steps, ms per token.
    pub p99_slope_ms_per_token: Option<f64>,
    /// The slope's 90% bootstrap interval, ms per token.
    pub p99_slope_interval: Option<[f64; 2]>,
    pub p99_intercept_ms: Option<f64>,
    pub token_bins: Vec<TokenBin>,
    /// The slope less the slope at the lowest rate probed, of stages whose
    /// slope can be read (see [`StageResult::slope_readable`]).
    pub p99_excess_ms_per_token: Option<f64>,
    /// USD per 1k tokens (input and output) by the scenario's `cost:`.
    pub cost_per_1k: Option<f64>,
    pub sla: Vec<SlaCheck>,
    pub worst_margin: f64,
    pub passed: bool,
    /// The margins and score of the joint decision (set once every stage
    /// has run: the excess and the knee need them all), as the stage's own
    /// `p99_margin`, `knee_margin`, `cost_margin` and `score`.
    #[serde(flatten)]
    pub scored: Option<Scored>,
    /// The stage's own load result.
    pub run: RunReport,
}

/// The seed of the slope's bootstrap: a stage's result is reproducible
/// from its requests.
const SLOPE_SEED: u64 = 0x5107_e5ee;

impl StageResult {
    /// Whether the P99 slope can be read against `bound` (the excess's,
    /// ms per token): its 90% interval is no wider than twice the bound.
    /// A wider one means the stage's few requests let queueing outliers
    /// set the slope, and the signal is left out rather than read as load.
    pub fn slope_readable(&self, bound: f64) -> bool {
        slope_readable(
            self.p99_slope_interval.map(|[low, high]| (low, high)),
            bound,
        )
    }
}

/// Measures a stage's run. `report` was summarised with the SLAs as its
/// run-wide thresholds.
pub fn measure(
    scenario: &Scenario,
    rate: f64,
    purpose: Purpose,
    out: &RunOutput,
    report: RunReport,
    early_stop: Option<&'static str>,
) -> StageResult {
    let warmup_us = u64::try_from(scenario.plan.warmup.as_micros()).unwrap_or(u64::MAX);
    let measured_s = out.ran_us.saturating_sub(warmup_us) as f64 / 1e6;
    let per_s = |n: u64| {
        if measured_s > 0.0 {
            n as f64 / measured_s
        } else {
            0.0
        }
    };
    let measured: Vec<&Outcome> = out.outcomes.iter().filter(|o| !o.warmup).collect();
    let journeys = measured
        .iter()
        .map(|o| o.index)
        .collect::<std::collections::BTreeSet<_>>()
        .len() as u64;
    // Rates of what ended inside the measured window: a stage stopped
    // early drains after its window, and what ends then would inflate
    // the rates of the shortened window.
    let in_window: Vec<&Outcome> = measured
        .iter()
        .copied()
        .filter(|o| o.end_us <= out.ran_us)
        .collect();
    let answers: Vec<Answer> = in_window.iter().map(|o| Answer::of(o)).collect();
    let ModelSignals {
        input_tokens,
        output_tokens,
        slope,
        cost_per_1k,
        points,
    } = model_signals(scenario, &answers, measured_s);
    let interval = slope
        .as_ref()
        .and_then(|_| slope_interval(&points, &mut rand::rngs::StdRng::seed_from_u64(SLOPE_SEED)))
        .map(|(low, high)| [low, high]);
    let sla: Vec<SlaCheck> = report
        .thresholds
        .iter()
        .filter(|t| t.step.is_none())
        .filter_map(|t| {
            Some(SlaCheck {
                gate: Gate::parse(t.name).ok()?,
                value: t.value,
                bound: t.bound,
                passed: t.passed,
            })
        })
        .collect();
    let worst_margin = if early_stop.is_some() {
        -1.0
    } else {
        worst(&sla)
    };
    StageResult {
        rate,
        purpose,
        duration_s: measured_s,
        achieved_rate: per_s(journeys),
        request_rate: per_s(in_window.len() as u64),
        requests_per_journey: if journeys > 0 {
            measured.len() as f64 / journeys as f64
        } else {
            1.0
        },
        early_stop,
        token_throughput: per_s(output_tokens),
        input_tokens,
        output_tokens,
        p99_slope_ms_per_token: slope.as_ref().map(|s| s.ms_per_token),
        p99_slope_interval: interval,
        p99_intercept_ms: slope.as_ref().map(|s| s.intercept_ms),
        token_bins: slope.map(|s| s.bins).unwrap_or_default(),
        p99_excess_ms_per_token: None,
        cost_per_1k,
        passed: early_stop.is_none() && sla.iter().all(|c| c.passed),
        sla,
        worst_margin,
        scored: None,
        run: report,
    }
}

/// The worst SLA margin, clipped to [−1, 1]; an SLA with nothing measured
/// counts −1. No SLA at all: 1.
pub fn worst(sla: &[SlaCheck]) -> f64 {
    sla.iter()
        .map(|c| match c.value {
            Some(v) => ((c.bound - v) / c.bound).clamp(-1.0, 1.0),
            None => -1.0,
        })
        .fold(1.0, f64::min)
}

#[cfg(test)]
pub(crate) mod tests;
