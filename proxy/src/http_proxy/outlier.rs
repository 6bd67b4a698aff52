//! Outlier detection's input: every answer an endpoint gives (a 5xx counts
//! as a failure, anything else ends the run) and every attempt that broke or
//! timed out after the connect (a failed connect ejects on its own, in
//! `fail_to_connect`). The arithmetic is `EndpointSet::record_answer`.

use sluice_filters::{Failure, Metrics};
use tracing::info;

use super::RequestCtx;

/// The upstream answered `status` on this attempt.
pub(super) fn on_answer(ctx: &mut RequestCtx, status: u16, now_ms: u64, metrics: &Metrics) {
    ctx.upstream_answered = true;
    record(ctx, status >= 500, now_ms, metrics);
}

/// The request ended: an attempt that broke or timed out before any answer
/// is a failure of its endpoint.
pub(super) fn on_end(ctx: &RequestCtx, now_ms: u64, metrics: &Metrics) {
    let broke = matches!(
        ctx.failure,
        Some(Failure::UpstreamTimeout | Failure::UpstreamError)
    );
    if broke && !ctx.upstream_answered {
        record(ctx, true, now_ms, metrics);
    }
}

fn record(ctx: &RequestCtx, failed: bool, now_ms: u64, metrics: &Metrics) {
    let (Some(cluster), Some(i)) = (ctx.cluster(), ctx.endpoint) else {
        return;
    };
    let Some(policy) = &cluster.config.outlier_detection else {
        return;
    };
    let Some(for_ms) = cluster.endpoints.record_answer(i, failed, now_ms, policy) else {
        return;
    };
    let endpoint = cluster
        .config
        .endpoints
        .get(i)
        .map(|e| e.addr.to_string())
        .unwrap_or_default();
    metrics
        .outlier_ejections
        .with_label_values(&[cluster.config.name.as_str(), endpoint.as_str()])
        .inc();
    info!(
        cluster = %cluster.config.name,
        endpoint = %endpoint,
        for_ms,
        "endpoint ejected by outlier detection"
    );
}
