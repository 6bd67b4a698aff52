//! A recorded journey (a replay's, or one sent beside a synthetic
//! scenario's journeys by `--feedback`): the recorded requests of one
//! session (or the one request without a session), each sent with its
//! recorded method, path and body at its recorded offset (after `--from`
//! and `--speed`), in order. A request whose predecessor in the session ended late is sent at
//! once, and its intended time stays the recorded one: the wait counts in
//! its response time (wrk2's rule, as for every other arrival).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Method;

use super::Ctx;
use crate::load::client::{Call, Outcome};
use crate::load::replay::{Planned, Recording};
use crate::load::schedule::Intended;

/// The recorded journeys of a run.
pub(crate) struct Replayed {
    /// The requests they send: `None` for a replay's own recording (the
    /// scenario's `replay`, not copied), else those sent beside a
    /// synthetic scenario's journeys.
    pub(crate) recording: Option<Recording>,
    /// Journey k runs for arrival `first + k`.
    pub(crate) journeys: Vec<Vec<Planned>>,
    /// Arrivals below it are synthetic: 0 in a replay.
    pub(crate) first: u64,
}

/// Ends by counting itself out of `live.journeys`, whatever happened.
pub(super) async fn journey(ctx: Arc<Ctx>, arrival: Intended) {
    run(&ctx, arrival).await;
    ctx.live.journeys.fetch_sub(1, Ordering::AcqRel);
}

async fn run(ctx: &Arc<Ctx>, arrival: Intended) {
    let Some(replayed) = &ctx.replay else {
        return;
    };
    let own = ctx.scenario.replay.as_ref().map(|r| &r.recording);
    let Some(recording) = replayed.recording.as_ref().or(own) else {
        return;
    };
    let Some(planned) = arrival
        .index
        .checked_sub(replayed.first)
        .and_then(|k| usize::try_from(k).ok())
        .and_then(|k| replayed.journeys.get(k))
    else {
        return;
    };
    let base = &ctx.scenario.target.base_url;
    let seed = ctx.scenario.plan.seed;
    for (i, p) in planned.iter().enumerate() {
        // A stop (Ctrl-C) ends dispatching, also within a session.
        if i > 0 && ctx.live.stop.load(Ordering::Acquire) {
            return;
        }
        let Some(recorded) = recording.requests.get(p.request) else {
            continue;
        };
        // A feedback scenario's requests are measured as its own step.
        let Some(step) = ctx.scenario.steps.get(recorded.step) else {
            continue;
        };
        let due = ctx.start + Duration::from_micros(p.at_us);
        if due > Instant::now() {
            tokio::time::sleep_until(due.into()).await;
        }
        let mut outcome = Outcome {
            step: recorded.step,
            index: arrival.index,
            stage: arrival.stage,
            warmup: arrival.warmup,
            intended_us: p.at_us,
            ..Outcome::default()
        };
        let call = Call {
            method: Method::from_bytes(recorded.method.as_bytes()).unwrap_or(Method::POST),
            uri: format!("{base}{}", recorded.path),
            headers: ctx.scenario.target.headers.clone(),
            body: match (&recorded.body, &recorded.sized) {
                (None, Some(sized)) => Some(sized.body(step, seed, p.request as u64)),
                (body, _) => body.clone(),
            },
            path: recorded.path.clone(),
            timeout: step.timeout,
            keep_body: false,
        };
        let Some(_permit) = super::journey::slot(ctx, &mut outcome).await else {
            return;
        };
        ctx.live.sent.fetch_add(1, Ordering::AcqRel);
        ctx.live.in_flight.fetch_add(1, Ordering::AcqRel);
        ctx.clients.http.send(call, ctx.start, &mut outcome).await;
        ctx.ended(outcome);
    }
}
