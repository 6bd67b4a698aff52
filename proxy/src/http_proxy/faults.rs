//! Faults injected before the upstream: the route's `x-sluice-fault-*`
//! headers (where allowed) and the first experiment of kind `Request` that
//! fires. A delay sleeps and lets the request go on; an abort answers
//! itself keeping the connection alive; `close` and `reset` drop the
//! client's connection without an answer.

use std::time::Duration;

use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::prelude::*;
use pingora::proxy::Session;
use sluice_control::FaultGuard;
use sluice_filters::{
    grpc_status_http, header_faults, ActionName, FaultAction, FaultKind, FaultTarget, GrpcAbort,
    Metrics, RequestAction, StreamAction,
};

use super::request_view::PingoraRequest;
use super::stream_fault::StreamFault;
use super::{respond_grpc, GrpcAnswer, RequestCtx};

/// What the request filter does after the faults were applied.
pub(super) enum Verdict {
    /// Go on to the upstream (perhaps after a delay already slept).
    Proceed,
    /// The answer was written; the request is done.
    Answered,
    /// Drop the client's connection without an answer.
    Drop,
}

/// The `experiment` label of faults asked for by request headers.
const HEADER_EXPERIMENT: &str = "header";
/// The body, or `grpc-message`, of an abort asked for by a header.
const HEADER_MESSAGE: &str = "fault injected by header";

pub(super) async fn before_upstream(
    listener: &str,
    metrics: &Metrics,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Verdict {
    let snapshot = ctx.snapshot.clone();
    let Some(route_index) = ctx.route else {
        return Verdict::Proceed;
    };
    if snapshot
        .config
        .routes
        .get(route_index)
        .is_some_and(|r| r.allow_header_faults)
    {
        let asked = header_faults(&PingoraRequest(session.req_header()));
        if !asked.is_empty() {
            let injected = &metrics.faults.injected;
            // A gRPC call takes the gRPC code when one is asked for (see
            // `abort`); any other request the HTTP status, or the code's.
            let status = asked.abort.or(asked.abort_grpc.map(grpc_status_http));
            if let Some(status) = status {
                injected
                    .with_label_values(&[HEADER_EXPERIMENT, ActionName::Abort.as_str()])
                    .inc();
                let grpc = asked.abort_grpc.map(|status| GrpcAbort {
                    status,
                    message: HEADER_MESSAGE.to_string(),
                });
                let answer = Abort {
                    status,
                    body: HEADER_MESSAGE,
                    grpc: grpc.as_ref(),
                };
                abort(session, ctx, answer, HEADER_EXPERIMENT).await;
                return Verdict::Answered;
            }
            if let Some(delay) = asked.delay {
                injected
                    .with_label_values(&[HEADER_EXPERIMENT, ActionName::Delay.as_str()])
                    .inc();
                tokio::time::sleep(delay).await;
            }
        }
    }
    let Some(guard) = fire(listener, session, ctx, FaultKind::Request) else {
        return Verdict::Proceed;
    };
    // `fire` picked an experiment of kind `Request`.
    let FaultAction::Request(action) = guard.runtime().experiment.action.clone() else {
        return Verdict::Proceed;
    };
    let id = guard.runtime().experiment.id.clone();
    match action {
        RequestAction::Delay {
            delay,
            jitter,
            distribution,
        } => {
            let wait = distribution.draw(delay, jitter, rand::random(), rand::random());
            tokio::time::sleep(wait).await;
            Verdict::Proceed
        }
        RequestAction::Abort { status, body, grpc } => {
            let answer = Abort {
                status,
                body: &body,
                grpc: grpc.as_ref(),
            };
            abort(session, ctx, answer, &id).await;
            Verdict::Answered
        }
        action @ (RequestAction::Reset | RequestAction::Close) => {
            if action == RequestAction::Reset {
                super::reset::arm(session);
            }
            ctx.fault_dropped = true;
            session.set_keepalive(None);
            Verdict::Drop
        }
    }
}

/// The first experiment of `kind` that fires for this request, if any.
pub(super) fn fire(
    listener: &str,
    session: &Session,
    ctx: &RequestCtx,
    kind: FaultKind,
) -> Option<FaultGuard> {
    let snapshot = &ctx.snapshot;
    if snapshot.faults.is_empty() {
        return None;
    }
    let req = PingoraRequest(session.req_header());
    let target = FaultTarget {
        listener,
        route: ctx.route_name(),
        cluster: ctx.cluster().map(|c| c.config.name.as_str()),
        model: ctx.request_model(),
        request: Some(&req),
    };
    // Only the experiments that can match this route: 1,000 of them on
    // other routes cost a request nothing.
    snapshot
        .faults_for(ctx.route)
        .filter(|f| f.experiment.action.kind() == kind)
        .find_map(|f| f.try_fire(&target, rand::random::<u64>).ok())
}

/// What an abort answers.
struct Abort<'a> {
    status: u16,
    body: &'a str,
    /// The gRPC status for gRPC calls, when the abort gives one.
    grpc: Option<&'a GrpcAbort>,
}

/// Writes the injected answer: on a gRPC call with a gRPC status, as
/// sluice writes its own gRPC errors; else `status` and the body with its
/// own length, so the connection stays usable (pingora's error responses
/// force `Connection: close`).
async fn abort(session: &mut Session, ctx: &mut RequestCtx, answer: Abort<'_>, id: &str) {
    if let Some(grpc) = answer.grpc.filter(|_| ctx.grpc) {
        ctx.injected_status = Some(answer.status);
        let reply = GrpcAnswer {
            status: grpc.status,
            message: &grpc.message,
            header: ("x-sluice-fault", id),
        };
        return respond_grpc(session, ctx, reply).await;
    }
    let body = Bytes::from(answer.body.to_string());
    let Ok(mut resp) = ResponseHeader::build(answer.status, Some(4)) else {
        return;
    };
    let _ = resp.insert_header("content-type", "text/plain");
    let _ = resp.insert_header("content-length", body.len());
    let _ = resp.insert_header("x-request-id", ctx.request_id.as_str());
    let _ = resp.insert_header("x-sluice-fault", id);
    if session
        .write_response_header(Box::new(resp), false)
        .await
        .is_ok()
    {
        let _ = session.write_response_body(Some(body), true).await;
    }
}

/// The error that makes pingora drop the client's connection unanswered.
pub(super) fn dropped() -> Box<Error> {
    Error::explain(
        ErrorType::ConnectionClosed,
        "fault injected: connection dropped",
    )
}

/// The streaming fault for this request, if one applies: the route's
/// `x-sluice-fault-token-delay` header (where allowed), else the first
/// experiment of kind `Stream` that fires. Only metered (LLM) answers are
/// paced.
pub(super) fn stream_fault(
    listener: &str,
    metrics: &Metrics,
    session: &Session,
    ctx: &RequestCtx,
) -> Option<StreamFault> {
    if !ctx.metered {
        return None;
    }
    let allowed = ctx
        .route
        .and_then(|r| ctx.snapshot.config.routes.get(r))
        .is_some_and(|r| r.allow_header_faults);
    if allowed {
        if let Some(delay) = header_faults(&PingoraRequest(session.req_header())).token_delay {
            metrics
                .faults
                .injected
                .with_label_values(&[HEADER_EXPERIMENT, ActionName::TokenDelay.as_str()])
                .inc();
            return Some(StreamFault {
                action: StreamAction::TokenDelay {
                    delay,
                    jitter: Duration::ZERO,
                },
                id: HEADER_EXPERIMENT.to_string(),
                guard: None,
            });
        }
    }
    let guard = fire(listener, session, ctx, FaultKind::Stream)?;
    let FaultAction::Stream(action) = guard.runtime().experiment.action else {
        return None;
    };
    Some(StreamFault {
        action,
        id: guard.runtime().experiment.id.clone(),
        guard: Some(guard),
    })
}
