//! A context sweep's stages as the result reports them: each stage's
//! prompt length against its TTFT, gap, errors and truncations, and the
//! first stage where the server stopped answering well.

use std::collections::BTreeMap;

use super::group::Group;
use crate::load::scenario::{context_limit, ContextSweep, SweepResult, SweepStage};

/// The sweep's result from its stages' groups (stages without a measured
/// request are left out).
pub(crate) fn sweep_result<K: Copy + TryInto<usize>>(
    sweep: ContextSweep,
    stages: &BTreeMap<K, Group>,
) -> SweepResult {
    let rows: Vec<SweepStage> = stages
        .iter()
        .filter_map(|(k, g)| {
            let stage: usize = (*k).try_into().ok()?;
            Some(SweepStage {
                stage,
                input_tokens: sweep.input_tokens(stage),
                requests: g.requests,
                errors: g.failed,
                truncations: g.truncated,
                p50_ttft_ms: g.quantile_ms("ttft", 0.5),
                p95_ttft_ms: g.quantile_ms("ttft", 0.95),
                p99_itl_ms: g.quantile_ms("itl", 0.99),
            })
        })
        .collect();
    SweepResult {
        from: sweep.from,
        to: sweep.to,
        steps: sweep.steps,
        context_limit: context_limit(&rows),
        stages: rows,
    }
}
