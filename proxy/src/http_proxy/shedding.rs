//! Admission under a route's `shedding`: while the route sheds (its level
//! above 0, one atomic read), the request's priority is read (a header, or
//! its model) and a request of a shed priority is answered 503 with
//! `retry-after`, before a cluster is chosen: it never reaches one, so the
//! clusters' windows and the shadow see nothing of it.

use pingora::proxy::Session;
use sluice_filters::{shed_body, Descriptor};

use super::{model_peek, read_header_model, refusal, RequestCtx};

pub(super) enum Verdict {
    Proceed,
    /// Shed: answered 503.
    Answered,
}

pub(super) async fn admit(session: &mut Session, ctx: &mut RequestCtx) -> Verdict {
    let route = ctx.route.and_then(|r| ctx.snapshot.routes.get(r));
    let shedding = route.and_then(|r| r.shedding.as_ref());
    // The common case, on every request of the route: one atomic load.
    let Some(shedding) = shedding.filter(|s| s.units() > 0).cloned() else {
        return Verdict::Proceed;
    };
    let rank = match &shedding.config.descriptor {
        Descriptor::Model => {
            read_header_model(session, ctx);
            if ctx.header_model.is_none() {
                model_peek::read(session, ctx).await;
            }
            shedding.rank(ctx.request_model().map(str::as_bytes))
        }
        Descriptor::Header(name) => shedding.rank(
            session
                .req_header()
                .headers
                .get(name.as_str())
                .map(|v| v.as_bytes()),
        ),
        Descriptor::Route => shedding.config.default,
    };
    if !shedding.sheds(rank, rand::random()) {
        return Verdict::Proceed;
    }
    let priority = shedding.config.levels.get(rank).map_or("", String::as_str);
    let retry_after_ms = u64::try_from(shedding.config.retry_after.as_millis()).unwrap_or(u64::MAX);
    let body = shed_body(priority, retry_after_ms);
    refusal::respond(session, ctx, 503, "shed", body, retry_after_ms, |_| {}).await;
    Verdict::Answered
}
