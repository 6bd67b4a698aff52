//! The model signals of a set of measured requests: token counts, the
//! P99-per-token slope and the cost of 1k tokens. One function serves the
//! stage's result (over the requests that ended in its window) and the
//! readings taken while the stage runs (over those that ended so far), so
//! the last live reading and the result agree by construction.

use serde::Serialize;
use sluice_filters::{
    cost_per_1k, p99_token_slope, token_cost_excess, Gate, Price, SlopeAt, TokenSlope, Usage,
};

use super::stage::Purpose;
use crate::load::{Answer, Scenario, Service};

/// What the answered model requests say.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ModelSignals {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub slope: Option<TokenSlope>,
    pub cost_per_1k: Option<f64>,
    /// `(output tokens, E2E ms)` of each answered model request: the
    /// slope's input, for its interval.
    pub points: Vec<(u64, f64)>,
}

/// The signals of `answers` over `seconds` of measured time. Only
/// answered (not failed) requests of `llm` steps count.
pub(crate) fn model_signals(scenario: &Scenario, answers: &[Answer], seconds: f64) -> ModelSignals {
    let model = |a: &&Answer| {
        a.ok && scenario
            .steps
            .get(a.step)
            .is_some_and(|s| s.service == Service::Llm)
    };
    let answered: Vec<&Answer> = answers.iter().filter(model).collect();
    let input_tokens: u64 = answered.iter().filter_map(|a| a.input_tokens).sum();
    let output_tokens: u64 = answered.iter().filter_map(|a| a.output_tokens).sum();
    let points: Vec<(u64, f64)> = answered
        .iter()
        .filter_map(|a| Some((a.output_tokens?, a.e2el_us as f64 / 1000.0)))
        .collect();
    let cost_per_1k = scenario.cost.as_ref().and_then(|price| {
        let usd = cost(price, scenario, &answered, seconds)?;
        cost_per_1k(usd, input_tokens + output_tokens)
    });
    ModelSignals {
        input_tokens,
        output_tokens,
        slope: p99_token_slope(&points),
        cost_per_1k,
        points,
    }
}

/// What the answered model requests cost: by time for a GPU-hour price;
/// by each step's model for per-token prices (`None` when a model has no
/// price, so that a partial sum never passes for the whole).
fn cost(price: &Price, scenario: &Scenario, answered: &[&Answer], seconds: f64) -> Option<f64> {
    if let Price::GpuHour { .. } = price {
        return price.cost_usd(&Usage {
            model: "",
            input_tokens: 0,
            output_tokens: 0,
            seconds,
        });
    }
    let mut usd = 0.0;
    for a in answered {
        let model = scenario.steps.get(a.step)?.model.as_deref()?;
        usd += price.cost_usd(&Usage {
            model,
            input_tokens: a.input_tokens.unwrap_or(0),
            output_tokens: a.output_tokens.unwrap_or(0),
            seconds: 0.0,
        })?;
    }
    Some(usd)
}

/// A running stage, read every second: the three signals as far as they
/// go, and each SLA's value so far.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StageProgress {
    pub index: usize,
    pub rate: f64,
    pub purpose: Purpose,
    /// The measured part so far (after the warm-up) and its planned
    /// length, s; 0 during the warm-up.
    pub elapsed_s: f64,
    pub length_s: f64,
    /// Requests in flight or waiting for a slot now.
    pub backlog: u64,
    /// Measured requests that ended, a second.
    pub request_rate: f64,
    /// Output tokens a second of the answered model requests.
    pub token_throughput: f64,
    pub p99_slope_ms_per_token: Option<f64>,
    /// Over the slope of the lowest-rate stage already run, when one ran
    /// below this rate.
    pub p99_excess_ms_per_token: Option<f64>,
    pub cost_per_1k: Option<f64>,
    /// Each SLA's value so far (the live histograms: within 1/32).
    pub sla: Vec<(Gate, Option<f64>)>,
}

impl StageProgress {
    /// A stage `elapsed_s` into its measured part, before its signals are
    /// read.
    pub(crate) fn at(index: usize, rate: f64, purpose: Purpose, elapsed_s: f64) -> StageProgress {
        StageProgress {
            index,
            rate,
            purpose,
            elapsed_s,
            length_s: 0.0,
            backlog: 0,
            request_rate: 0.0,
            token_throughput: 0.0,
            p99_slope_ms_per_token: None,
            p99_excess_ms_per_token: None,
            cost_per_1k: None,
            sla: Vec::new(),
        }
    }

    /// Reads the signals from the measured requests that ended so far;
    /// `base` is the slope of the lowest-rate stage already run, and its
    /// rate.
    pub(crate) fn read(&mut self, scenario: &Scenario, answers: &[Answer], base: Option<SlopeAt>) {
        let m = model_signals(scenario, answers, self.elapsed_s);
        let per_s = |n: f64| {
            if self.elapsed_s > 0.0 {
                n / self.elapsed_s
            } else {
                0.0
            }
        };
        let slope = m.slope.map(|s| s.ms_per_token);
        self.request_rate = per_s(answers.len() as f64);
        self.token_throughput = per_s(m.output_tokens as f64);
        self.p99_slope_ms_per_token = slope;
        self.p99_excess_ms_per_token = match (slope, base) {
            (Some(v), Some(b)) if b.rate < self.rate => Some(token_cost_excess(v, b)),
            _ => None,
        };
        self.cost_per_1k = m.cost_per_1k;
    }
}

#[cfg(test)]
mod tests;
