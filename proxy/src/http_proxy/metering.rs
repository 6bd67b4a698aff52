//! Token metering on the request path: the request head is kept (as
//! refcounted chunks) until it can be scanned for the model, and the answer
//! is fed to the token meter chunk by chunk as it goes to the client.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use sluice_filters::{scan_request, Dialect, TokenMeter, TokenOutcome};

use super::RequestCtx;

/// The model is read from at most this much of the request body.
pub(super) const REQUEST_SCAN_LIMIT: usize = 64 * 1024;

/// Keeps the request's first chunks until the limit or the end, then scans them once.
pub(super) fn on_request_chunk(ctx: &mut RequestCtx, chunk: Option<&Bytes>, end_of_stream: bool) {
    if ctx.request_info.is_some() {
        return;
    }
    if let Some(chunk) = chunk {
        if !chunk.is_empty() {
            ctx.request_head_len += chunk.len();
            ctx.request_head.push(chunk.clone());
        }
    }
    if end_of_stream || ctx.request_head_len >= REQUEST_SCAN_LIMIT {
        let head = std::mem::take(&mut ctx.request_head);
        let info = match head.as_slice() {
            [one] => scan_request(&one[..one.len().min(REQUEST_SCAN_LIMIT)]),
            many => {
                let mut joined =
                    BytesMut::with_capacity(ctx.request_head_len.min(REQUEST_SCAN_LIMIT));
                for c in many {
                    let room = REQUEST_SCAN_LIMIT - joined.len();
                    joined.extend_from_slice(&c[..c.len().min(room)]);
                }
                scan_request(&joined)
            }
        };
        ctx.request_info = Some(info);
    }
}

/// Starts the meter once the answer's headers are known. Compressed answers
/// are not metered: their bytes are not the events.
pub(super) fn on_response_head(
    ctx: &mut RequestCtx,
    path: &str,
    content_type: Option<&[u8]>,
    encoded: bool,
) {
    if !ctx.metered || encoded {
        return;
    }
    let dialect = Dialect::detect(path, content_type);
    if dialect != Dialect::Unknown {
        ctx.meter = Some(TokenMeter::new(dialect));
    }
}

/// Feeds one chunk on its way to the client; records the gaps between content chunks.
pub(super) fn on_response_chunk(ctx: &mut RequestCtx, chunk: Option<&Bytes>, end_of_stream: bool) {
    let Some(meter) = ctx.meter.as_mut() else {
        return;
    };
    let at = ctx.started.elapsed();
    if let Some(chunk) = chunk {
        let events = meter.feed(chunk, at);
        if events > 0 {
            if let Some(last) = ctx.last_content_at {
                ctx.gaps.push(at.saturating_sub(last));
            }
            // Several events in one read reached the client together.
            for _ in 1..events {
                ctx.gaps.push(Duration::ZERO);
            }
            ctx.last_content_at = Some(at);
        }
    }
    if end_of_stream {
        finish(ctx, at);
    }
}

/// Ends metering (also when the stream broke off): the summary becomes the
/// request's token outcome.
pub(super) fn finish(ctx: &mut RequestCtx, at: Duration) {
    if let Some(mut meter) = ctx.meter.take() {
        let summary = meter.finish(at);
        ctx.tokens = Some(TokenOutcome {
            summary,
            gaps: std::mem::take(&mut ctx.gaps),
        });
    }
}
