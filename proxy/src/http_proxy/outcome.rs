//! The end of a request: one record, handed to the metrics, the access
//! log, the recorder, the tracer and (last, taking the gaps rather than copying them) the
//! stats windows.

use std::time::SystemTime;

use pingora::http::RequestHeader;
use sluice_control::{GrpcOutcome, Sample, TokenSample};
use sluice_filters::{Failure, RequestRecord, Source, TokenOutcome};

use super::{HttpProxy, RequestCtx};
use crate::telemetry::{FinishedRequest, GrpcCall};

pub(super) fn record(proxy: &HttpProxy, ctx: &mut RequestCtx, req: &RequestHeader, status: u16) {
    // An answer's head read it; a request that got none (a faulted stream,
    // a failed attempt) reads it now, from its last endpoint.
    if ctx.kvcache_ratio.is_none() {
        ctx.read_kvcache_ratio(&proxy.shared.kv_cache);
    }
    let (method, path) = (req.method.as_str(), req.uri.path());
    let recording = ctx.recording.take();
    let e2e = ctx.started.elapsed();
    let seconds = e2e.as_secs_f64();
    let snapshot = ctx.snapshot.clone();
    // Filled when the request reached a cluster: the stats sample is sent last,
    // so that it can take the gaps instead of copying them.
    let mut stats_key = None;
    let mut cost_usd = None;
    let route = ctx.route.and_then(|r| snapshot.routes.get(r));
    let target = route.and_then(|r| r.targets.get(ctx.target?));
    let cluster = ctx.cluster().map(|c| &c.config);
    // A gRPC call's method, `package.Service/Method`: its grpc_method label,
    // its recorded method, and its gen_ai_operation_name when metered.
    let grpc_method = ctx
        .grpc
        .then(|| sluice_filters::grpc_method(path).map_or("unknown", |(_, _)| &path[1..]));
    let record = RequestRecord {
        request_id: &ctx.request_id,
        route: route.map_or("", |r| r.name.as_str()),
        cluster: cluster.map_or("", |c| c.name.as_str()),
        version: cluster.map_or("", |c| c.version.as_str()),
        model: ctx.model(),
        operation: ctx.operation,
        method,
        path,
        status,
        e2e,
        failure: ctx.failure,
        tokens: ctx.tokens.as_ref(),
        prompt_fingerprint: ctx
            .request_info
            .as_ref()
            .and_then(|i| i.prompt_fingerprint.as_deref()),
        upstream: ctx.upstream_timing,
        load_run: ctx.load_run.as_deref(),
        grpc_status: ctx.grpc_status,
        grpc_method,
        kvcache_ratio: ctx.kvcache_ratio,
    };
    let source = ctx.source();
    if let Some(method) = grpc_method {
        proxy.shared.metrics.grpc_request(
            [record.route, record.cluster, record.version],
            method,
            ctx.grpc_status,
        );
    }

    match (route, target) {
        (Some(_), Some(target)) => {
            target.metrics.record(status, seconds, source);
            if let Some(f) = ctx.failure {
                target.metrics.record_failure(f);
            }
            if ctx.metered {
                // One lookup per call, at its end (a short list: see `genai.rs`).
                let operation = grpc_method.unwrap_or(record.operation.as_str());
                let genai = target.genai.get(record.model, operation, source);
                genai.duration.observe(seconds);
                if let Some(t) = &ctx.tokens {
                    if let Some(ttft) = t.ttft() {
                        genai.ttft.observe(ttft.as_secs_f64());
                    }
                    for gap in &t.gaps {
                        genai.per_chunk.observe(gap.as_secs_f64());
                    }
                    if let Some(tpot) = record.tpot() {
                        genai.tpot.observe(tpot.as_secs_f64());
                    }
                    if let Some(n) = t.summary.input_tokens {
                        genai.input_tokens.observe(n as f64);
                    }
                    match (t.summary.output_tokens, t.summary.output_tokens_estimated) {
                        (Some(n), false) => genai.output_tokens.observe(n as f64),
                        (Some(n), true) => genai.output_tokens_estimated.observe(n as f64),
                        (None, _) => {}
                    }
                    // The cluster's table prices the model it was sent,
                    // which a rewrite may have changed; chunk-counted
                    // output is priced too, the best count there is.
                    let (input, output) = (
                        t.summary.input_tokens.unwrap_or(0),
                        t.summary.output_tokens.unwrap_or(0),
                    );
                    let model = target.rewrite_model.as_deref().unwrap_or(record.model);
                    cost_usd = target.cost.charge(model, input, output);
                }
            }
            stats_key = Some(target.stats);
        }
        (Some(route), None) => {
            route.unrouted.record(status, seconds, source);
            if let Some(f) = ctx.failure {
                route.unrouted.record_failure(f);
            }
        }
        _ => {
            if let Some(m) = snapshot.no_route.get(proxy.listener) {
                m.record(status, seconds, source);
                m.record_failure(ctx.failure.unwrap_or(Failure::NoRoute));
            }
        }
    }
    if let Some(log) = &proxy.access_log {
        log.log(&record, rand::random::<f64>());
    }
    if let Some(recording) = recording {
        super::recording::finish(*recording, ctx, &record, req);
    }
    if let Some(trace) = &ctx.trace {
        let tokens = ctx.tokens.as_ref();
        proxy.tracer.finish(
            trace,
            &FinishedRequest {
                start: ctx.started_at,
                end: SystemTime::now(),
                method,
                path,
                status,
                route: record.route,
                cluster: record.cluster,
                version: record.version,
                lineage_id: ctx.cluster().map(|c| c.lineage_id.as_str()),
                operation: if ctx.metered {
                    record.operation.as_str()
                } else {
                    ""
                },
                request_model: if ctx.metered { record.model } else { "" },
                response_model: tokens.and_then(|t| t.summary.response_model.as_deref()),
                input_tokens: tokens.and_then(|t| t.summary.input_tokens),
                output_tokens: tokens.and_then(|t| t.summary.output_tokens),
                finish_reason: tokens.and_then(|t| t.summary.finish_reason.as_deref()),
                ttft: tokens.and_then(TokenOutcome::ttft),
                prompt_fingerprint: record.prompt_fingerprint,
                load_run: record.load_run,
                kvcache_ratio: record.kvcache_ratio,
                error: ctx.failure.map(Failure::reason),
                grpc: ctx.grpc.then(|| {
                    let (service, method) = sluice_filters::grpc_method(path).unwrap_or(("", ""));
                    GrpcCall {
                        service,
                        method,
                        status: ctx.grpc_status,
                    }
                }),
                attempts: &ctx.attempts,
            },
        );
    }
    let tpot = record.tpot();
    if let Some(key) = stats_key {
        let tokens = ctx.tokens.as_mut().map(|t| TokenSample {
            ttft: t.ttft(),
            tpot,
            gaps: std::mem::take(&mut t.gaps),
            output_tokens: t.summary.output_tokens.unwrap_or(0),
            input_tokens: t.summary.input_tokens.unwrap_or(0),
            cost_usd,
        });
        proxy.shared.stats.record(Sample {
            key,
            status,
            latency: e2e,
            tokens,
            load: source == Source::Load,
            grpc: ctx.grpc.then_some(match ctx.grpc_status {
                Some(code) => GrpcOutcome::Status(code),
                None => GrpcOutcome::NoStatus,
            }),
        });
    }
}
