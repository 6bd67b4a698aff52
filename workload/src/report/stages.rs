//! The per-stage view: each stage's TTFT beside the KV-cache pressure the
//! proxy reported for its requests (so that the two line up), and a
//! context sweep's stages against their prompt length.

use serde::Serialize;

use super::input::Run;

/// One stage's line in the stages table.
#[derive(Clone, Debug, Serialize)]
pub struct StageRow {
    pub stage: u64,
    pub requests: u64,
    pub failed: u64,
    /// Answers cut by the model's context.
    pub truncated: u64,
    pub p50_ttft_ms: Option<f64>,
    pub p95_ttft_ms: Option<f64>,
    pub p99_itl_ms: Option<f64>,
    /// Over the requests whose answer carried a reading (`None` without
    /// any: the target was no sluice proxy, or its cluster is not scraped).
    pub mean_kvcache_ratio: Option<f64>,
    pub max_kvcache_ratio: Option<f64>,
}

/// The stages of `run`, in order.
pub(crate) fn rows(run: &Run) -> Vec<StageRow> {
    run.stages
        .iter()
        .map(|(stage, g)| {
            let ms = |m: &str, q: f64| {
                g.dist(m)
                    .and_then(|d| d.quantile(q))
                    .map(|u| u as f64 / 1000.0)
            };
            StageRow {
                stage: *stage,
                requests: g.requests,
                failed: g.failed,
                truncated: g.metric("truncated").map_or(0, |t| t as u64),
                p50_ttft_ms: ms("ttft", 0.5),
                p95_ttft_ms: ms("ttft", 0.95),
                p99_itl_ms: ms("itl", 0.99),
                mean_kvcache_ratio: g.metric("mean_kvcache_ratio"),
                max_kvcache_ratio: g.metric("max_kvcache_ratio"),
            }
        })
        .collect()
}
