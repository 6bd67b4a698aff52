//! The refusals a route's own policy writes before any upstream is asked
//! (429 rate limited, 503 shed): a JSON body in the OpenAI error shape,
//! `retry-after` in seconds and `retry-after-ms`, `x-sluice-error` naming
//! the cause, and the connection kept alive.

use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use sluice_filters::retry_after_secs;

use super::RequestCtx;

/// Writes the refusal; `headers` adds what is particular to it.
pub(super) async fn respond(
    session: &mut Session,
    ctx: &RequestCtx,
    status: u16,
    error: &'static str,
    body: String,
    retry_after_ms: u64,
    headers: impl FnOnce(&mut ResponseHeader),
) {
    let body = Bytes::from(body);
    let Ok(mut resp) = ResponseHeader::build(status, Some(8)) else {
        return;
    };
    let _ = resp.insert_header("content-type", "application/json");
    let _ = resp.insert_header("content-length", body.len());
    let _ = resp.insert_header("x-request-id", ctx.request_id.as_str());
    let _ = resp.insert_header("x-sluice-error", error);
    let _ = resp.insert_header("retry-after", retry_after_secs(retry_after_ms));
    // The OpenAI SDKs read the millisecond form first.
    let _ = resp.insert_header("retry-after-ms", retry_after_ms);
    headers(&mut resp);
    if session
        .write_response_header(Box::new(resp), false)
        .await
        .is_ok()
    {
        let _ = session.write_response_body(Some(body), true).await;
    }
}
