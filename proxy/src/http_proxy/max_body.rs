//! `routes[].max_body`: a request whose body is longer than its route takes
//! is answered 413. A declared `content-length` is refused before any of the
//! body is read or sent upstream; a body without one (chunked, HTTP/2) is
//! counted as it passes and cut where it crosses the limit. Either way the
//! connection is not reused, since the rest of the body is still on it: the
//! proxy reads and drops what the client still sends for a short while (a
//! lingering close) so that the client reads the 413 rather than a reset.

use std::time::Duration;

use bytes::Bytes;
use pingora::prelude::*;
use pingora::proxy::Session;

use super::RequestCtx;

/// How long the rest of a refused body is read and dropped, at most.
const LINGER: Duration = Duration::from_secs(2);

/// The route's limit, once the route is known.
fn limit(ctx: &RequestCtx) -> Option<u64> {
    ctx.route
        .and_then(|r| ctx.snapshot.routes.get(r))
        .map(|r| r.max_body)
}

/// Whether the request declares a body longer than its route takes.
pub(super) fn declared_too_large(session: &Session, ctx: &RequestCtx) -> bool {
    let Some(max) = limit(ctx) else { return false };
    session
        .req_header()
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|declared| declared > max)
}

/// Counts one chunk of the body on its way upstream; the error (413) when
/// the body has now passed the route's limit.
pub(super) fn on_chunk(ctx: &mut RequestCtx, chunk: Option<&Bytes>) -> Result<()> {
    let Some(chunk) = chunk else { return Ok(()) };
    ctx.request_body_bytes += chunk.len() as u64;
    match limit(ctx) {
        Some(max) if ctx.request_body_bytes > max => Error::e_explain(
            ErrorType::HTTPStatus(413),
            format!("request body passed max_body ({max} bytes)"),
        ),
        _ => Ok(()),
    }
}

/// After the 413: no keep-alive, and what the client still sends is read
/// and dropped for up to [`LINGER`], so that closing does not reset the
/// connection under the answer.
pub(super) async fn linger(session: &mut Session) {
    session.set_keepalive(None);
    if !session.as_mut().is_body_done() {
        let _ = tokio::time::timeout(LINGER, session.as_mut().drain_request_body()).await;
    }
}
