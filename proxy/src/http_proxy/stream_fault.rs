//! Streaming faults on LLM answers, driven on their own timer. pingora's
//! body filter can only pause a batch of queued chunks, so per-token delays
//! done there arrive in bursts. A faulted request is therefore sent to the
//! upstream here, its answer read event by event as it comes, and each
//! event written to the client when the [`Pacer`] says: the client sees
//! even gaps. Plain-HTTP clusters only; the request body is read whole
//! first (the pacing is about the answer).

use std::collections::VecDeque;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use pingora::http::ResponseHeader;
use pingora::prelude::*;
use pingora::proxy::Session;
use sluice_control::FaultGuard;
use sluice_filters::{
    Dialect, EventKind, FaultAction, Pacer, Step, TokenMeter, TruncateMode, CORRUPT_EVENT,
    HOP_BY_HOP,
};
use tokio::time::{sleep_until, Instant};

use super::{metering, RequestCtx};

/// A faulted request's body is read whole; larger ones are refused.
const MAX_BODY: usize = 8 * 1024 * 1024;

/// What the faulted answer is paced by: an experiment's action (with the
/// guard that counts it in `max_active`) or a request header's token delay.
pub struct StreamFault {
    pub action: FaultAction,
    pub id: String,
    pub guard: Option<FaultGuard>,
}

/// How the faulted request ended.
pub enum Ended {
    /// The answer was written whole (or truncated cleanly).
    Done,
    /// The connection must be cut (abrupt truncation, upstream failure
    /// after the head was sent).
    Cut,
    /// Nothing was written: the caller answers with this failure.
    Failed(sluice_filters::Failure),
}

pub async fn serve(
    session: &mut Session,
    ctx: &mut RequestCtx,
    fault: StreamFault,
    now_ms: u64,
) -> Ended {
    let Some(cluster) = ctx.cluster().cloned() else {
        return Ended::Failed(sluice_filters::Failure::NoCluster);
    };
    let body = match read_body(session, ctx).await {
        Ok(body) => body,
        Err(()) => return Ended::Failed(sluice_filters::Failure::BadRequest),
    };
    let config = &cluster.config;
    let Some(i) = cluster.endpoints.pick(now_ms, 0) else {
        return Ended::Failed(sluice_filters::Failure::ConnectError);
    };
    ctx.endpoint = Some(i);
    let endpoint = &config.endpoints[i];
    let req_header = session.req_header();
    let path = req_header
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let mut builder = http::Request::builder()
        .method(req_header.method.clone())
        .uri(format!("http://{}{path}", endpoint.addr));
    for (name, value) in req_header.headers.iter() {
        if name != "host" && !HOP_BY_HOP.contains(&name.as_str()) {
            builder = builder.header(name, value);
        }
    }
    builder = builder.header("host", endpoint.host.as_str());
    let Ok(request) = builder.body(Full::new(body)) else {
        return Ended::Failed(sluice_filters::Failure::BadRequest);
    };
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(config.timeouts.connect));
    connector.set_nodelay(true);
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build(connector);
    let read_timeout = config.timeouts.first_byte;
    let response = match tokio::time::timeout(read_timeout, client.request(request)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) if e.is_connect() => {
            return Ended::Failed(sluice_filters::Failure::ConnectError)
        }
        Ok(Err(_)) => return Ended::Failed(sluice_filters::Failure::UpstreamError),
        Err(_) => return Ended::Failed(sluice_filters::Failure::UpstreamTimeout),
    };
    cluster.endpoints.restore(i);
    let (parts, mut upstream) = response.into_parts();
    let Ok(mut head) = ResponseHeader::build(parts.status, Some(parts.headers.len() + 4)) else {
        return Ended::Failed(sluice_filters::Failure::UpstreamError);
    };
    for (name, value) in parts.headers.iter() {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            let _ = head.append_header(name.clone(), value.clone());
        }
    }
    if req_header.version != http::Version::HTTP_2 {
        let _ = head.insert_header("transfer-encoding", "chunked");
    }
    let _ = head.insert_header("x-request-id", ctx.request_id.as_str());
    let _ = head.insert_header("x-sluice-fault", fault.id.as_str());
    let content_type = parts
        .headers
        .get("content-type")
        .map(|v| v.as_bytes().to_vec());
    let request_path = req_header.uri.path().to_string();
    metering::on_response_head(ctx, &request_path, content_type.as_deref(), false);
    if session
        .write_response_header(Box::new(head), false)
        .await
        .is_err()
    {
        return Ended::Cut;
    }

    // The pacer's clock starts now; events are timed by when they arrive.
    let start = Instant::now();
    let dialect = Dialect::detect(&request_path, content_type.as_deref());
    let ndjson = dialect == Dialect::Ollama;
    let mut classifier = TokenMeter::new(dialect);
    let mut pacer = Pacer::new(fault.action);
    let mut carry = BytesMut::new();
    let mut queue: VecDeque<(Duration, Out)> = VecDeque::new();
    let mut upstream_done = false;
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
                    Out::End(TruncateMode::Clean) => break,
                    Out::End(TruncateMode::Abrupt) => return Ended::Cut,
                }
            }
            frame = tokio::time::timeout(read_timeout, upstream.frame()), if !upstream_done => {
                let arrival = start.elapsed();
                match frame {
                    Ok(Some(Ok(frame))) => {
                        if let Ok(data) = frame.into_data() {
                            carry.extend_from_slice(&data);
                            while let Some(event) = next_event(&mut carry, ndjson) {
                                let content = classifier.feed(&event, arrival) > 0;
                                let kind = EventKind::of(&event, content);
                                plan(&mut pacer, &mut queue, event, kind, arrival);
                            }
                        }
                    }
                    Ok(None) => {
                        upstream_done = true;
                        if !carry.is_empty() {
                            let rest = carry.split().freeze();
                            plan(&mut pacer, &mut queue, rest, EventKind::Other, arrival);
                        }
                    }
                    // The upstream failed mid-answer: the client sees a cut, as it would unfaulted.
                    Ok(Some(Err(_))) | Err(_) => return Ended::Cut,
                }
            }
            else => break,
        }
    }
    metering::on_response_chunk(ctx, None, true);
    if session.write_response_body(None, true).await.is_err() {
        return Ended::Cut;
    }
    drop(fault.guard);
    Ended::Done
}

enum Out {
    Bytes(Bytes),
    End(TruncateMode),
}

fn plan(
    pacer: &mut Pacer,
    queue: &mut VecDeque<(Duration, Out)>,
    event: Bytes,
    kind: EventKind,
    arrival: Duration,
) {
    for step in pacer.on_event(kind, event.len(), arrival, rand::random()) {
        match step {
            Step::Forward(at) => queue.push_back((at, Out::Bytes(event.clone()))),
            Step::Corrupt(at) => {
                queue.push_back((at, Out::Bytes(Bytes::from_static(CORRUPT_EVENT))))
            }
            Step::End(at, mode) => queue.push_back((at, Out::End(mode))),
        }
    }
}

/// Takes one whole event (up to and including its blank line) off the
/// front of `carry`: SSE events end with `\n\n` or `\r\n\r\n`; Ollama's
/// newline-delimited JSON with `\n`.
fn next_event(carry: &mut BytesMut, ndjson: bool) -> Option<Bytes> {
    if ndjson {
        let end = carry.iter().position(|b| *b == b'\n')? + 1;
        return Some(carry.split_to(end).freeze());
    }
    let end = carry
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|i| i + 2)
        .or_else(|| {
            carry
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map(|i| i + 4)
        })?;
    Some(carry.split_to(end).freeze())
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
