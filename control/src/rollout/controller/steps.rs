//! What the status shows of each step: the canary's error rate, p99 and
//! prompt coverage at the last evaluation there, and the coverage gauge.

use super::{Cell, Env, Inner};
use crate::config::RolloutConfig;
use crate::mirror::PromptCoverage;
use crate::rollout::source::Gathered;
use crate::rollout::status::{CoverageStatus, StepFigures};
use crate::stats::Measure;

impl Cell {
    /// The canary's figures at `step`, kept in the step history
    /// (the last evaluation at a step stays once the rollout moves on), and
    /// the coverage gauge.
    pub(super) fn record_step(
        &self,
        env: &Env,
        inner: &mut Inner,
        gathered: &Gathered,
        (step, weight): (usize, u32),
        coverage: Option<CoverageStatus>,
    ) {
        if let Some(percent) = coverage.as_ref().and_then(|c| c.percent) {
            env.metrics()
                .coverage
                .with_label_values(&[self.name.as_str()])
                .set(percent / 100.0);
        }
        let (requests, error_rate, latency_p99_ms) = match gathered {
            Gathered::Windows { canary, .. } => (
                canary.requests,
                canary.error_percent(),
                canary.quantile_ms(Measure::Latency, 0.99),
            ),
            Gathered::Figures { .. } => (0, None, None),
        };
        inner.step_history.insert(
            step,
            StepFigures {
                step,
                weight,
                requests,
                error_rate,
                latency_p99_ms,
                coverage,
            },
        );
    }
}

/// Step `step`'s coverage by the canary.
pub(super) fn coverage_status(
    c: &PromptCoverage,
    step: usize,
    config: &RolloutConfig,
) -> CoverageStatus {
    let r = c.reading(step, &config.canary);
    CoverageStatus {
        step,
        canary_clusters: r.touched,
        clusters_seen: r.seen,
        percent: r.percent(),
        prompts: r.prompts,
        prompts_seen: r.prompts_seen,
    }
}
