//! The model of a request whose body names it, read before the upstream is
//! chosen, for fault experiments that match on `model`. The L7 and streaming
//! faults are decided in `request_filter`, before pingora reads the body; a
//! client such as the OpenAI SDK names the model only in the body.
//!
//! Only a body whose `content-length` fits pingora's retry buffer (64 KiB) is
//! read early: pingora keeps what was read there and sends it upstream first
//! (it is the buffer a retried attempt replays), so the upstream sees the body
//! unchanged. A larger or chunked body is not read early, and an experiment
//! that matches on the model then sees only `telemetry.model_header`.
//!
//! The same read serves routes that match on the model (`match.model`,
//! before the route is chosen) and a split target's `rewrite.model`.

use bytes::{Bytes, BytesMut};
use pingora::proxy::Session;
use sluice_filters::scan_request;

use super::RequestCtx;

/// pingora's retry buffer (`BODY_BUF_LIMIT` in pingora-core).
const RETRY_BUFFER: usize = 64 * 1024;

/// Reads the body and scans it for the model when an experiment (or, with
/// `routing`, a route of the listener) needs the model and no header gave it.
/// The body read is kept in `ctx.peeked_body`.
pub(super) async fn read_if_needed(session: &mut Session, ctx: &mut RequestCtx, routing: bool) {
    if ctx.header_model.is_some() || ctx.request_info.is_some() {
        return;
    }
    let wanted = routing
        || ctx
            .snapshot
            .faults_for(ctx.route)
            .any(|f| f.experiment.matcher.model.is_some());
    if wanted {
        read(session, ctx).await;
    }
}

/// Reads the body early (once) if it fits the retry buffer, and scans it.
pub(super) async fn read(session: &mut Session, ctx: &mut RequestCtx) {
    if ctx.peeked_body.is_some() {
        return;
    }
    let length = session
        .req_header()
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    let Some(length) = length.filter(|l| (1..=RETRY_BUFFER).contains(l)) else {
        return;
    };
    let mut body = BytesMut::with_capacity(length);
    loop {
        match session.downstream_session.read_request_body().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) => break,
            // The proxy meets the same error when it reads on.
            Err(_) => return,
        }
    }
    let body: Bytes = body.freeze();
    ctx.request_info = Some(scan_request(&body));
    ctx.peeked_body = Some(body);
}
