//! Streaming faults on LLM answers, driven on their own timer. pingora's
//! body filter can only pause a batch of queued chunks, so per-token delays
//! done there arrive in bursts. A faulted request is therefore sent to the
//! upstream here, through the data plane's pooled [`UpstreamClient`] (the
//! proxy's peer, TLS, ejection, retry rule and trace attempts), its answer
//! cut into events by the one `Framer` as it comes, each event classified
//! by the token meter, and written to the client when the [`Pacer`] says:
//! the client sees even gaps. The request body is read whole first (the
//! pacing is about the answer). An answer event longer than the framer's
//! limit (1 MiB) is dropped, as the meter drops it.
//!
//! A gRPC answer (over HTTP/2 both ways) is cut into its messages instead,
//! each paced as one content event; a message over [`GRPC_MESSAGE_LIMIT`]
//! goes on in pieces, unpaced. Its trailers follow the last message; a
//! clean truncation ends the call with `grpc-status: 0` (the stream just
//! stops early, as an SSE one does), an abrupt one resets it.

use std::collections::VecDeque;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use http::HeaderMap;
use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use sluice_control::FaultGuard;
use sluice_filters::{
    Dialect, EventKind, Framer, Framing, GrpcCutter, Pacer, Step, StreamAction, TokenMeter,
    TruncateMode, CORRUPT_EVENT, CORRUPT_GRPC_MESSAGE, HOP_BY_HOP,
};
use tokio::time::{sleep_until, Instant};

use super::{grpc_status_of, metering, RequestCtx};
use crate::upstream::{self, Answer, Part, Policy, Target, Traced, UpstreamClient};

/// A faulted request's body is read whole; larger ones are refused.
const MAX_BODY: usize = 8 * 1024 * 1024;

/// gRPC messages up to this size are paced whole (gRPC's default largest
/// message a client takes).
const GRPC_MESSAGE_LIMIT: usize = 4 * 1024 * 1024;

/// What the faulted answer is paced by: an experiment's action (with the
/// guard that counts it in `max_active`) or a request header's token delay.
pub(super) struct StreamFault {
    pub action: StreamAction,
    pub id: String,
    pub guard: Option<FaultGuard>,
}

/// How the faulted request ended.
pub(super) enum Ended {
    /// The answer was written whole (or truncated cleanly).
    Done,
    /// The connection must be cut (abrupt truncation, upstream failure
    /// after the head was sent).
    Cut,
    /// Nothing was written: the caller answers with this failure.
    Failed(sluice_filters::Failure),
}

pub(super) async fn serve(
    session: &mut Session,
    ctx: &mut RequestCtx,
    fault: StreamFault,
    client: &Arc<UpstreamClient>,
    now_ms: &(dyn Fn() -> u64 + Sync),
) -> Ended {
    let answer = match send(session, ctx, client, now_ms).await {
        Ok(answer) => answer,
        Err(failure) => return Ended::Failed(failure),
    };
    let upstream_head = answer.head();
    let Ok(mut head) =
        ResponseHeader::build(upstream_head.status, Some(upstream_head.headers.len() + 4))
    else {
        return Ended::Failed(sluice_filters::Failure::UpstreamError);
    };
    for (name, value) in upstream_head.headers.iter() {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            let _ = head.append_header(name.clone(), value.clone());
        }
    }
    let req_header = session.req_header();
    if req_header.version != http::Version::HTTP_2 {
        let _ = head.insert_header("transfer-encoding", "chunked");
    }
    let _ = head.insert_header("x-request-id", ctx.request_id.as_str());
    let _ = head.insert_header("x-sluice-fault", fault.id.as_str());
    let content_type = upstream_head
        .headers
        .get("content-type")
        .map(|v| v.as_bytes().to_vec());
    // Compressed bytes are not events: they are forwarded as they come.
    let encoded = upstream_head
        .headers
        .get("content-encoding")
        .is_some_and(|e| e.as_bytes() != b"identity");
    let request_path = req_header.uri.path().to_string();
    metering::on_response_head(ctx, &request_path, content_type.as_deref(), encoded);
    if ctx.grpc {
        // A trailers-only answer (an error) has its status in the head.
        ctx.grpc_status = grpc_status_of(&upstream_head.headers);
    }
    if session
        .write_response_header(Box::new(head), false)
        .await
        .is_err()
    {
        return Ended::Cut;
    }
    let dialect = Dialect::detect(&request_path, content_type.as_deref());
    let ended = pace(session, ctx, answer, fault.action, dialect, encoded).await;
    drop(fault.guard);
    ended
}

/// Sends the request through the pooled client; records the endpoint, the
/// upstream timing and the attempts as the proxy does.
async fn send(
    session: &mut Session,
    ctx: &mut RequestCtx,
    client: &Arc<UpstreamClient>,
    now_ms: &(dyn Fn() -> u64 + Sync),
) -> Result<Answer, sluice_filters::Failure> {
    let Some(cluster) = ctx.cluster().cloned() else {
        return Err(sluice_filters::Failure::NoCluster);
    };
    let body = read_body(session, ctx)
        .await
        .map_err(|()| sluice_filters::Failure::BadRequest)?;
    let req = session.req_header();
    let path = req.uri.path_and_query().map_or("/", |p| p.as_str());
    let authority = req.uri.authority().map(|a| a.as_str());
    let head = upstream::request_head(&req.method, path, &req.headers, authority, body.len())
        .ok_or(sluice_filters::Failure::BadRequest)?;
    let target = Target {
        cluster: &cluster,
        endpoints: &cluster.endpoints,
        now_ms,
        policy: Policy::PROXY,
    };
    ctx.upstream_timing.peer = ctx.stamp();
    let traced = ctx.trace.as_mut().map(|trace| Traced {
        trace,
        attempts: &mut ctx.attempts,
    });
    match client.send(&target, &head, &body, traced).await {
        Ok(answer) => {
            ctx.endpoint = Some(answer.endpoint());
            ctx.upstream_timing.header = ctx.stamp();
            ctx.upstream_timing.reused = ctx.timed.then_some(answer.reused());
            Ok(answer)
        }
        Err(failed) => {
            ctx.endpoint = failed.endpoint;
            Err(failed.failure)
        }
    }
}

/// Reads the answer as it comes and writes each event when the pacer says.
async fn pace(
    session: &mut Session,
    ctx: &mut RequestCtx,
    answer: Answer,
    action: StreamAction,
    dialect: Dialect,
    encoded: bool,
) -> Ended {
    // The pacer's clock starts now; events are timed by when they arrive.
    let start = Instant::now();
    let framing = match dialect.framing() {
        Framing::Lines => Framing::Lines,
        // A non-streamed answer is cut where an SSE event would end (most
        // have no blank line, so it goes whole at the end).
        Framing::Sse | Framing::Whole | Framing::Off => Framing::Sse,
    };
    let grpc = dialect == Dialect::Grpc;
    let mut framer = Framer::new(framing);
    let mut messages = GrpcCutter::new(GRPC_MESSAGE_LIMIT);
    let mut classifier = TokenMeter::new(dialect);
    let mut pacer = Pacer::new(action);
    let corrupt = if grpc {
        CORRUPT_GRPC_MESSAGE
    } else {
        CORRUPT_EVENT
    };
    let mut queue: VecDeque<(Duration, Out)> = VecDeque::new();
    let mut upstream = pin!(answer.into_body());
    let mut upstream_done = false;
    let mut trailers: Option<Box<HeaderMap>> = None;
    let mut truncated = false;
    loop {
        let next_at = queue.front().map(|(at, _)| start + *at);
        tokio::select! {
            biased;
            () = sleep_until(next_at.unwrap_or(start)), if next_at.is_some() => {
                let Some((_, out)) = queue.pop_front() else { continue };
                match out {
                    Out::Bytes(bytes) => {
                        metering::on_response_chunk(ctx, Some(&bytes), false);
                        if session.write_response_body(Some(bytes), false).await.is_err() {
                            return Ended::Cut;
                        }
                    }
                    Out::End(TruncateMode::Clean) => {
                        truncated = true;
                        break;
                    }
                    Out::End(TruncateMode::Abrupt) => return Ended::Cut,
                }
            }
            // Each read waits at most the cluster's `first_byte` (the peer's
            // read timeout); the stream keeps a read cut short by the timer.
            part = upstream.next(), if !upstream_done => {
                let arrival = start.elapsed();
                let mut queue_event = |raw: &[u8], kind: EventKind| {
                    let event = Bytes::copy_from_slice(raw);
                    plan(&mut pacer, &mut queue, event, kind, arrival, corrupt);
                };
                match part {
                    Some(Ok(Part::Data(data))) if encoded => queue_event(&data, EventKind::Other),
                    Some(Ok(Part::Data(data))) if grpc => messages.feed(&data, |message, ends| {
                        queue_event(message, if ends { EventKind::Content } else { EventKind::Other });
                    }),
                    Some(Ok(Part::Data(data))) => framer.feed(&data, |event| {
                        let kind = classifier.read_event(event, arrival);
                        queue_event(event.raw, kind);
                    }),
                    Some(Ok(Part::Trailers(t))) => trailers = Some(t),
                    None => {
                        upstream_done = true;
                        messages.finish(|rest, _| queue_event(rest, EventKind::Other));
                        framer.finish(|event| {
                            let kind = classifier.read_event(event, arrival);
                            queue_event(event.raw, kind);
                        });
                    }
                    // The upstream failed mid-answer: the client sees a cut, as it would unfaulted.
                    Some(Err(_)) => return Ended::Cut,
                }
            }
            else => break,
        }
    }
    metering::on_response_chunk(ctx, None, true);
    if grpc && truncated {
        trailers = Some(Box::new(grpc_ok()));
    }
    // Trailers go to an HTTP/2 client only (pingora drops HTTP/1.1 ones).
    let h2 = session.req_header().version == http::Version::HTTP_2;
    let written = match trailers {
        Some(trailers) if ctx.grpc && h2 => {
            if let Some(status) = grpc_status_of(&trailers) {
                ctx.grpc_status = Some(status);
            }
            session
                .downstream_session
                .write_response_trailers(*trailers)
                .await
        }
        _ => session.write_response_body(None, true).await,
    };
    match written {
        Ok(_) => Ended::Done,
        Err(_) => Ended::Cut,
    }
}

/// The trailers of a call a clean truncation ended: a success, early.
fn grpc_ok() -> HeaderMap {
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    trailers
}

enum Out {
    Bytes(Bytes),
    End(TruncateMode),
}

/// Queues what the pacer makes of one event; `corrupt` is what a
/// `corrupt` action inserts (an SSE event or a gRPC message).
fn plan(
    pacer: &mut Pacer,
    queue: &mut VecDeque<(Duration, Out)>,
    event: Bytes,
    kind: EventKind,
    arrival: Duration,
    corrupt: &'static [u8],
) {
    for step in pacer.on_event(kind, event.len(), arrival, rand::random()) {
        match step {
            Step::Forward(at) => queue.push_back((at, Out::Bytes(event.clone()))),
            Step::Corrupt(at) => queue.push_back((at, Out::Bytes(Bytes::from_static(corrupt)))),
            Step::End(at, mode) => queue.push_back((at, Out::End(mode))),
        }
    }
}

/// Reads the request body whole (at most [`MAX_BODY`]), metering it as the
/// normal path would.
async fn read_body(session: &mut Session, ctx: &mut RequestCtx) -> Result<Bytes, ()> {
    // Read already, whole, when an experiment needed the model (`model_peek.rs`).
    if let Some(body) = ctx.peeked_body.take() {
        return Ok(body);
    }
    let mut body = BytesMut::new();
    loop {
        match session.downstream_session.read_request_body().await {
            Ok(Some(chunk)) => {
                metering::on_request_chunk(ctx, Some(&chunk), false);
                if body.len() + chunk.len() > MAX_BODY {
                    return Err(());
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => {
                metering::on_request_chunk(ctx, None, true);
                return Ok(body.freeze());
            }
            Err(_) => return Err(()),
        }
    }
}
