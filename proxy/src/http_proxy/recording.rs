//! The recorder on the request path: whether this request is recorded
//! (decided once the route is known), its body's first chunks (refcounted,
//! not copied), and the owned record handed to the recording's queue at the
//! end. Building the line is the recording's writer's work, not this
//! thread's.

use std::sync::Arc;

use bytes::Bytes;
use pingora::http::RequestHeader;
use sluice_control::{Capture, CaptureIds, Captured, RECORDER_MAX_BODY};
use sluice_filters::{RequestRecord, TraceContext};

use super::RequestCtx;

/// A request being recorded.
pub(crate) struct Recording {
    capture: Arc<Capture>,
    session_id: Option<String>,
    body: Vec<Bytes>,
    body_len: usize,
    body_cut: bool,
}

/// Decides, once the route is known, whether this request is recorded.
pub(super) fn on_route(ctx: &mut RequestCtx, capture: Option<Arc<Capture>>, req: &RequestHeader) {
    let Some(capture) = capture else { return };
    let Some(route) = ctx.route.and_then(|r| ctx.snapshot.routes.get(r)) else {
        return;
    };
    let sticky = route.sticky.as_ref().map(|(header, _)| header.as_str());
    let header = capture.config().session_header(sticky);
    let session = req.headers.get(header).map(|v| v.as_bytes());
    if !capture.keeps(&route.name, session) {
        return;
    }
    ctx.recording = Some(Box::new(Recording {
        session_id: session.map(|s| String::from_utf8_lossy(s).into_owned()),
        capture,
        body: Vec::new(),
        body_len: 0,
        body_cut: false,
    }));
}

/// Keeps the body's chunks up to the recorder's limit.
pub(super) fn on_request_chunk(ctx: &mut RequestCtx, chunk: Option<&Bytes>) {
    let (Some(recording), Some(chunk)) = (ctx.recording.as_mut(), chunk) else {
        return;
    };
    if chunk.is_empty() || recording.body_cut {
        return;
    }
    if recording.body_len + chunk.len() > RECORDER_MAX_BODY {
        recording.body_cut = true;
        recording.body.clear();
        return;
    }
    recording.body_len += chunk.len();
    recording.body.push(chunk.clone());
}

/// Hands the finished request to the recording.
pub(super) fn finish(
    recording: Recording,
    ctx: &RequestCtx,
    record: &RequestRecord<'_>,
    req: &RequestHeader,
) {
    let Recording {
        capture,
        session_id,
        mut body,
        body_cut,
        ..
    } = recording;
    // A body read before the upstream was chosen (`model_peek.rs`) did not
    // pass the body filter.
    if body.is_empty() && !body_cut {
        if let Some(peeked) = &ctx.peeked_body {
            body.push(peeked.clone());
        }
    }
    let trace_id = match &ctx.trace {
        Some(trace) => Some(trace.context.trace_id_hex()),
        None => req
            .headers
            .get("traceparent")
            .and_then(|v| TraceContext::parse(v.as_bytes()))
            .map(|c| c.trace_id_hex()),
    };
    let ids = CaptureIds {
        trace_id: trace_id.as_deref(),
        session_id: session_id.as_deref(),
        lineage_id: ctx.cluster().map(|c| c.lineage_id.as_str()),
    };
    let arrived = (ctx.started, ctx.started_at);
    let captured = Captured::new(record, ids, arrived, body, body_cut);
    capture.submit(captured);
}
