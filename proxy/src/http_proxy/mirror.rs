//! The request path's side of shadow traffic. Nothing here waits: the
//! sampling decision is two atomics, body chunks are kept as refcounted
//! `Bytes` as they stream to the primary, and at the end of the request
//! one job goes to the sender's bounded queue with `try_send`.

use std::sync::Arc;

use bytes::Bytes;
use pingora::http::RequestHeader;
use sluice_control::MirrorRuntime;
use sluice_filters::MirrorResult;

use super::RequestCtx;
use crate::mirror::{Answer, Job, MirrorQueue};

/// Answer bytes of the primary kept for the comparison (as the shadow's).
const COMPARE_LIMIT: usize = 256 * 1024;

/// What a mirrored request collects on its way.
pub(crate) struct MirrorCapture {
    policy: Arc<MirrorRuntime>,
    copies: u32,
    /// Sampled for coverage: the rollout's step when the request arrived.
    coverage_step: Option<usize>,
    body: Vec<Bytes>,
    body_len: usize,
    too_large: bool,
    body_done: bool,
    answer: Vec<Bytes>,
    answer_len: usize,
}

/// Decides, once the route is known, whether this request is mirrored.
pub(super) fn on_route(ctx: &mut RequestCtx, req: &RequestHeader) {
    let Some(policy) = ctx
        .route
        .and_then(|r| ctx.snapshot.routes.get(r))
        .and_then(|r| r.mirror.clone())
    else {
        return;
    };
    let session = policy
        .config
        .sample_by
        .as_ref()
        .and_then(|h| req.headers.get(h.as_str()))
        .map(|v| v.as_bytes());
    let mut copies = policy.sampler.copies(session);
    // Coverage samples the route's prompts on its own draw (one atomic add
    // while a rollout runs): copies or not, the body is kept for them.
    let coverage_step = policy.coverage.as_ref().and_then(|c| c.sample());
    if copies > 0 {
        if let Some(reason) = policy.gate.closed() {
            policy.metrics.count(reason, copies);
            copies = 0;
        }
    }
    if copies > 0 || coverage_step.is_some() {
        ctx.mirror = Some(Box::new(MirrorCapture {
            policy,
            copies,
            coverage_step,
            body: Vec::new(),
            body_len: 0,
            too_large: false,
            body_done: false,
            answer: Vec::new(),
            answer_len: 0,
        }));
    }
}

/// A new upstream attempt: pingora replays the body read so far (its retry
/// buffer) through `request_body_filter`, so the copy starts over with it.
pub(super) fn on_attempt(ctx: &mut RequestCtx) {
    if let Some(m) = ctx.mirror.as_mut() {
        m.body.clear();
        m.body_len = 0;
        m.too_large = false;
        m.body_done = false;
    }
}

/// Keeps a request body chunk (a refcount); past `max_body` the body is
/// let go and the request will not be mirrored.
pub(super) fn on_request_chunk(ctx: &mut RequestCtx, chunk: Option<&Bytes>, end_of_stream: bool) {
    let Some(m) = ctx.mirror.as_mut() else { return };
    if let Some(chunk) = chunk.filter(|c| !c.is_empty()) {
        m.body_len += chunk.len();
        if m.body_len > m.policy.config.max_body {
            m.too_large = true;
            m.body = Vec::new();
        } else if !m.too_large {
            m.body.push(chunk.clone());
        }
    }
    m.body_done |= end_of_stream;
}

/// Keeps the primary's answer up to the comparison limit.
pub(super) fn on_response_chunk(ctx: &mut RequestCtx, chunk: Option<&Bytes>) {
    // Kept only for copies to be compared with (coverage reads the prompt).
    let Some(m) = ctx.mirror.as_mut().filter(|m| m.copies > 0) else {
        return;
    };
    if let Some(chunk) = chunk.filter(|c| !c.is_empty()) {
        m.answer_len += chunk.len();
        if m.answer_len <= COMPARE_LIMIT {
            m.answer.push(chunk.clone());
        }
    }
}

/// End of the request: hands the job over, or counts why there is none.
/// `body_done` says whether the client's body arrived whole.
pub(super) fn on_done(
    ctx: &mut RequestCtx,
    queue: Option<&MirrorQueue>,
    req: &RequestHeader,
    status: u16,
    body_done: bool,
) {
    let Some(m) = ctx.mirror.take() else { return };
    let metrics = &m.policy.metrics;
    if m.too_large {
        metrics.count(MirrorResult::BodyTooLarge, m.copies);
        if m.coverage_step.is_some() {
            metrics.count_coverage("no_text", 1);
        }
        return;
    }
    // A client that went away mid-body sent no request to copy.
    let (Some(queue), true) = (queue, m.body_done || body_done) else {
        return;
    };
    let tokens = ctx.tokens.as_ref();
    let job = Job {
        shadow_copies: m.copies,
        primary_cluster: ctx.cluster().cloned(),
        request_id: ctx.request_id.clone(),
        method: req.method.clone(),
        path: req
            .uri
            .path_and_query()
            .map_or_else(|| req.uri.path().to_string(), |p| p.as_str().to_string()),
        headers: req.headers.clone(),
        authority: req.uri.authority().map(|a| a.as_str().to_owned()),
        body: m.body,
        primary: Answer {
            status,
            latency: ctx.started.elapsed(),
            ttft: tokens.and_then(|t| t.ttft()),
            output_tokens: tokens.and_then(|t| t.summary.output_tokens),
            body: m.answer,
            bytes: m.answer_len,
            truncated: m.answer_len > COMPARE_LIMIT,
            grpc_status: ctx.grpc_status,
        },
        policy: m.policy,
        coverage_step: m.coverage_step,
    };
    queue.submit(job);
}
