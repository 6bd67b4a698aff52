//! Admission under a route's `limits`: the budget key, the reservation (the
//! prompt's estimate and `max_tokens` or the route's default), the 429 with
//! the headers OpenAI clients read, and the settlement when the answer ends
//! (the server's `usage`, else the meter's count).

use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use sluice_filters::{
    estimate_input_tokens, format_reset, limit_key, limited_body, store_down_body, Cost, Decision,
    LimitKind, RateHeaders,
};

use super::{model_peek, refusal, RequestCtx};

/// What became of the request at admission.
pub(super) enum Verdict {
    /// No limit on the route, or within it.
    Proceed,
    /// Over a limit: answered 429 (or 503 when a fleet-wide budget's store
    /// is unavailable and the route fails closed).
    Answered,
}

/// Admits the request against its route's limits; writes the 429 when over.
pub(super) async fn admit(session: &mut Session, ctx: &mut RequestCtx, now_ms: u64) -> Verdict {
    let Some(limits) = ctx
        .route
        .and_then(|r| ctx.snapshot.routes.get(r))
        .and_then(|r| r.limits.clone())
    else {
        return Verdict::Proceed;
    };
    // The model, the prompt's size and `max_tokens` are in the body.
    model_peek::read(session, ctx).await;
    let info = ctx.request_info.as_ref();
    let reserved = Cost {
        input: info.map_or(0, |i| estimate_input_tokens(i.input_chars)),
        output: info
            .and_then(|i| i.max_tokens)
            .unwrap_or(limits.config.default_max_tokens),
    };
    let headers = &session.req_header().headers;
    let key = limit_key(
        &limits.config.descriptor,
        ctx.route_name().unwrap_or(""),
        ctx.request_model(),
        |name| headers.get(name).map(|v| v.as_bytes()),
    );
    match limits.admit(&key, reserved, now_ms) {
        (Decision::Allowed(rate), admission) => {
            ctx.rate_headers = Some(rate);
            ctx.admission = admission.map(|a| (limits, a));
            Verdict::Proceed
        }
        (
            Decision::Limited {
                kind,
                retry_after_ms,
                headers,
            },
            _,
        ) => {
            respond_limited(session, ctx, kind, retry_after_ms, headers).await;
            Verdict::Answered
        }
        (Decision::StoreUnavailable { retry_after_ms }, _) => {
            respond_store_unavailable(session, ctx, retry_after_ms).await;
            Verdict::Answered
        }
    }
}

/// Ends the request's hold on its budget: charged what the answer cost. An
/// answer whose count is unknown is charged its reservation; one that failed
/// before any answer is charged its prompt only.
pub(super) fn settle(ctx: &mut RequestCtx, status: u16, now_ms: u64) {
    let Some((limits, admission)) = ctx.admission.take() else {
        return;
    };
    let reserved = admission.reserved;
    let summary = ctx.tokens.as_ref().map(|t| &t.summary);
    let failed = status == 0 || status >= 400;
    let actual = Cost {
        input: summary
            .and_then(|s| s.input_tokens)
            .unwrap_or(reserved.input),
        output: summary.and_then(|s| s.output_tokens).unwrap_or(if failed {
            0
        } else {
            reserved.output
        }),
    };
    limits.settle(admission, actual, now_ms);
}

/// The `x-ratelimit-*` headers, on answers and refusals alike.
pub(super) fn insert_headers(resp: &mut ResponseHeader, rate: &RateHeaders) {
    if let Some((limit, remaining, reset)) = rate.requests {
        let _ = resp.insert_header("x-ratelimit-limit-requests", limit);
        let _ = resp.insert_header("x-ratelimit-remaining-requests", remaining);
        let _ = resp.insert_header("x-ratelimit-reset-requests", format_reset(reset));
    }
    if let Some((limit, remaining, reset)) = rate.tokens {
        let _ = resp.insert_header("x-ratelimit-limit-tokens", limit);
        let _ = resp.insert_header("x-ratelimit-remaining-tokens", remaining);
        let _ = resp.insert_header("x-ratelimit-reset-tokens", format_reset(reset));
    }
}

async fn respond_limited(
    session: &mut Session,
    ctx: &RequestCtx,
    kind: LimitKind,
    retry_after_ms: u64,
    rate: RateHeaders,
) {
    let body = limited_body(kind, retry_after_ms);
    refusal::respond(
        session,
        ctx,
        429,
        "rate_limited",
        body,
        retry_after_ms,
        |resp| insert_headers(resp, &rate),
    )
    .await;
}

/// A fleet-wide route failing closed while its store cannot be reached:
/// 503, so clients retry rather than read it as their own budget spent.
async fn respond_store_unavailable(session: &mut Session, ctx: &RequestCtx, retry_after_ms: u64) {
    refusal::respond(
        session,
        ctx,
        503,
        "ratelimit_store_unavailable",
        store_down_body(),
        retry_after_ms,
        |_| {},
    )
    .await;
}
