//! Judging the gates: from what the canary and stable did in the window,
//! and the GPU and model-server readings, to one reading per gate. Pure:
//! the controller gathers the observation (from this instance's windows,
//! or as figures from Prometheus), the policy acts on the readings.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use sluice_filters::{cost_per_1k, CoverageReading, Price, Usage};

use crate::config::{Gate, Gates, RolloutConfig, Unit};
use crate::mirror::ShadowReading;
use crate::stats::{Measure, WindowView};

/// Everything the gates are judged on, gathered at one instant.
#[derive(Clone, Copy, Debug)]
pub enum Observation<'a> {
    /// This instance's stats windows and observers.
    Windows {
        canary: &'a WindowView,
        stable: &'a WindowView,
        /// Percent of memory used on the fullest GPU; `None` without a reading.
        gpu_memory_percent: Option<f64>,
        /// Requests waiting at the canary's model server; `None` when it is
        /// not scraped or did not answer.
        upstream_waiting: Option<f64>,
        /// What the route's mirror measured of the canary as its shadow;
        /// `None` when the route does not mirror to the canary.
        shadow: Option<ShadowReading>,
        /// The canary's prompt coverage at the current step; `None` when
        /// the route's mirror does not measure coverage.
        coverage: Option<CoverageReading>,
    },
    /// Each gate's value and samples as read elsewhere (fleet mode: PromQL
    /// over every instance); a gate missing here has nothing to read.
    Figures(&'a Figures),
}

/// One gate's value over the window, with the samples behind it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Figure {
    /// In the gate's unit; `None` when nothing to read.
    pub value: Option<f64>,
    /// Canary samples.
    pub samples: u64,
    /// Relative gates: stable samples.
    pub stable_samples: Option<u64>,
}

/// Figures by gate.
pub type Figures = BTreeMap<Gate, Figure>;

/// One gate at one evaluation: the evidence behind every decision.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct GateReading {
    pub gate: Gate,
    /// The canary's value in the gate's unit; `None` when nothing to read.
    pub value: Option<f64>,
    pub bound: f64,
    pub unit: Unit,
    /// Canary samples the value is computed from.
    pub samples: u64,
    /// Relative gates: stable samples in the same window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_samples: Option<u64>,
    /// `None` when not judged (too few samples, or no reading).
    pub ok: Option<bool>,
}

impl GateReading {
    pub fn breached(&self) -> bool {
        self.ok == Some(false)
    }

    /// `ttft_p95 400ms > 150ms (120 samples)`, for events and logs.
    /// `cost_per_1k_max $0.0213 > $0.012 (150 samples)`, too.
    pub fn describe(&self) -> String {
        let show = |v: f64| match self.unit {
            Unit::Ms | Unit::Percent => format!("{}{}", round(v, 3), self.unit.as_str()),
            // Dispersions are small: keep their digits.
            Unit::Ratio if v != 0.0 && v.abs() < 0.1 => round(v, 6).to_string(),
            Unit::Ratio | Unit::Requests => round(v, 3).to_string(),
            // Prices per 1k tokens are fractions of a cent.
            Unit::Usd => format!("${}", round(v, 6)),
        };
        let value = self.value.map_or_else(|| "n/a".to_string(), show);
        let cmp = match (self.ok, self.gate.is_lower_bound()) {
            (Some(true), false) => "<=",
            (Some(false), false) => ">",
            (Some(true), true) => ">=",
            (Some(false), true) => "<",
            (None, _) => "vs",
        };
        format!(
            "{} {value} {cmp} {} ({} samples)",
            self.gate.as_str(),
            show(self.bound),
            self.samples
        )
    }
}

/// `decimals` at most: readings are for people.
fn round(v: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (v * scale).round() / scale
}

/// Reads every configured gate. A gate is judged only with at least
/// `min_requests` canary samples (relative gates: stable samples too) and
/// a value to compare; it passes when the value is at most the bound (at
/// least, for a lower bound such as `grpc_success_rate_min`). A gate that
/// holds until met (`min_coverage`) is judged only once it is met: below
/// its bound it is not enough evidence yet, never a breach.
pub(super) fn judge(config: &RolloutConfig, obs: &Observation<'_>) -> Vec<GateReading> {
    let min_requests = config.min_requests;
    config
        .gates
        .bounds()
        .into_iter()
        .map(|(gate, bound)| {
            let f = match obs {
                Observation::Figures(figures) => figures.get(&gate).copied().unwrap_or_default(),
                Observation::Windows { .. } => windows_figure(gate, config, obs),
            };
            let enough = f.samples >= min_requests
                && f.stable_samples.is_none_or(|s| s >= min_requests)
                && busy_enough(config, gate, &f);
            let ok = f
                .value
                .filter(|_| enough)
                .map(|v| gate.passes(v, bound))
                .filter(|passed| *passed || !gate.holds_until_met());
            GateReading {
                gate,
                value: f.value,
                bound,
                unit: gate.unit(),
                samples: f.samples,
                stable_samples: f.stable_samples,
                ok,
            }
        })
        .collect()
}

/// A plan's busy-route rule: `p99_vs_stable` is judged only while the
/// route takes more than `p99_vs_stable_above_rps`, read as the gate's own
/// samples (canary and stable requests in the window) over the window.
fn busy_enough(config: &RolloutConfig, gate: Gate, f: &Figure) -> bool {
    let Some(above) = config.p99_vs_stable_above_rps else {
        return true;
    };
    if gate != Gate::P99VsStable {
        return true;
    }
    let requests = f.samples + f.stable_samples.unwrap_or(0);
    requests as f64 / config.window.as_secs_f64().max(1.0) > above
}

/// One gate's figure from this instance's windows and observers.
fn windows_figure(gate: Gate, config: &RolloutConfig, obs: &Observation<'_>) -> Figure {
    let Observation::Windows {
        canary,
        stable,
        gpu_memory_percent,
        upstream_waiting,
        shadow,
        coverage,
    } = *obs
    else {
        return Figure::default();
    };
    let q = |view: &WindowView, measure, q| view.quantile_ms(measure, q);
    let (value, samples, stable_samples) = match gate {
        Gate::TtftP95 => (
            q(canary, Measure::Ttft, 0.95),
            canary.count(Measure::Ttft),
            None,
        ),
        Gate::TtftP99 => (
            q(canary, Measure::Ttft, 0.99),
            canary.count(Measure::Ttft),
            None,
        ),
        Gate::GapP99 => (q(canary, Measure::Gap, 0.99), canary.gap_requests, None),
        Gate::TpotP95 => (
            q(canary, Measure::Tpot, 0.95),
            canary.count(Measure::Tpot),
            None,
        ),
        Gate::LatencyP99 => (q(canary, Measure::Latency, 0.99), canary.requests, None),
        Gate::ErrorRate => (canary.error_percent(), canary.requests, None),
        Gate::P99VsStable => (
            ratio(
                q(canary, Measure::Latency, 0.99),
                q(stable, Measure::Latency, 0.99),
            ),
            canary.requests,
            Some(stable.requests),
        ),
        Gate::TtftVsStable => (
            ratio(
                q(canary, Measure::Ttft, 0.95),
                q(stable, Measure::Ttft, 0.95),
            ),
            canary.count(Measure::Ttft),
            Some(stable.count(Measure::Ttft)),
        ),
        Gate::GpuMemoryMax => (gpu_memory_percent, canary.requests, None),
        Gate::UpstreamQueueMax => (upstream_waiting, canary.requests, None),
        // Samples are the canary's gRPC calls: with none, no reading.
        Gate::GrpcSuccessRateMin => (
            canary.grpc_success_percent(config.gates.grpc_failures),
            canary.grpc_calls(),
            None,
        ),
        Gate::CostPer1kMax => match &config.canary_price {
            Some(p @ Price::GpuHour { .. }) => (
                window_cost_per_1k(p, canary, config.window),
                canary.token_requests,
                None,
            ),
            Some(p @ Price::PerToken(_)) => (
                window_cost_per_1k(p, canary, config.window),
                canary.priced_requests,
                None,
            ),
            None => (None, 0, None),
        },
        // Samples are the mirror's: pairs scored, prompts dispersed.
        Gate::EmbeddingSimilarityP10Min => shadow.map_or((None, 0, None), |s| {
            (s.drift.p10, s.drift.pairs as u64, None)
        }),
        Gate::EmbeddingDriftKlMax => shadow.map_or((None, 0, None), |s| {
            (s.drift.kl, s.drift.pairs as u64, None)
        }),
        Gate::AnswerDispersionMax => {
            shadow.map_or((None, 0, None), |s| (s.dispersion, s.prompts as u64, None))
        }
        // Samples are every prompt embedded since the rollout started: the
        // clusters seen must rest on enough of them.
        Gate::MinCoverage => {
            coverage.map_or((None, 0, None), |c| (c.percent(), c.prompts_seen, None))
        }
    };
    Figure {
        value,
        samples,
        stable_samples,
    }
}

/// USD per 1k tokens of a window of the canary. Per-token prices: what
/// the data plane charged over the tokens it priced (a model the table
/// lacks is left out of both, as `sluice capacity` never lets a partial
/// sum pass for the whole). A GPU-hour price: the window's length over
/// every token, since the canary's GPUs are paid whether or not tokens
/// flow.
fn window_cost_per_1k(price: &Price, view: &WindowView, window: Duration) -> Option<f64> {
    match price {
        Price::PerToken(_) => cost_per_1k(view.cost_usd, view.priced_tokens),
        Price::GpuHour { .. } => {
            let usd = price.cost_usd(&Usage {
                model: "",
                input_tokens: view.input_tokens,
                output_tokens: view.output_tokens,
                seconds: window.as_secs_f64(),
            })?;
            cost_per_1k(usd, view.tokens())
        }
    }
}

/// The distributions the gates read, of the canary and of stable: a window
/// merges only those (counts are always there).
pub(super) fn measures(gates: &Gates) -> (Vec<Measure>, Vec<Measure>) {
    let (mut canary, mut stable) = (Vec::new(), Vec::new());
    for (gate, _) in gates.bounds() {
        let measure = match gate {
            Gate::TtftP95 | Gate::TtftP99 | Gate::TtftVsStable => Measure::Ttft,
            Gate::GapP99 => Measure::Gap,
            Gate::TpotP95 => Measure::Tpot,
            Gate::LatencyP99 | Gate::P99VsStable => Measure::Latency,
            Gate::ErrorRate
            | Gate::GpuMemoryMax
            | Gate::UpstreamQueueMax
            | Gate::CostPer1kMax
            | Gate::GrpcSuccessRateMin
            | Gate::EmbeddingSimilarityP10Min
            | Gate::EmbeddingDriftKlMax
            | Gate::AnswerDispersionMax
            | Gate::MinCoverage => continue,
        };
        if !canary.contains(&measure) {
            canary.push(measure);
        }
        if gate.is_relative() && !stable.contains(&measure) {
            stable.push(measure);
        }
    }
    (canary, stable)
}

fn ratio(canary: Option<f64>, stable: Option<f64>) -> Option<f64> {
    let (c, s) = (canary?, stable?);
    (s > 0.0).then(|| c / s)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
#[path = "gates/mirror_tests.rs"]
mod mirror_tests;

#[cfg(test)]
#[path = "gates/coverage_tests.rs"]
mod coverage_tests;
