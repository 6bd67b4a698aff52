//! The HTTP data plane: one `ProxyHttp` per listener. Each request loads the
//! live snapshot once, keeps it in its context, picks a route, a cluster and
//! an endpoint from tables built with the snapshot, and records one outcome.

mod breakers;
mod context;
mod errors;
mod faults;
mod limits;
mod load;
mod max_body;
mod metering;
mod mirror;
mod model_peek;
mod outcome;
mod outlier;
mod recording;
mod refusal;
mod request_id;
mod request_view;
mod reset;
mod shedding;
mod stream_fault;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use sluice_control::{ClusterKind, Shared, SnapshotStore};
use sluice_filters::{
    error_body, grpc_message, is_grpc, parse_grpc_timeout, Failure, Operation, RequestView,
};
use tracing::{debug, debug_span};

use crate::access_log::AccessLog;
use crate::lifecycle::Lifecycle;
use crate::mirror::MirrorQueue;
use crate::telemetry::{Attempt, Tracer};
use crate::upstream::{self, UpstreamClient, EJECTION};
pub(crate) use breakers::OVERFLOW;
pub(crate) use context::RequestCtx;
pub(crate) use errors::classify;
use request_view::PingoraRequest;

pub(crate) struct HttpProxy {
    /// Index of this proxy's listener in the config.
    listener: usize,
    store: Arc<SnapshotStore>,
    lifecycle: Arc<Lifecycle>,
    /// The metrics and stats windows outcomes are recorded into.
    shared: Shared,
    access_log: Option<Arc<AccessLog>>,
    tracer: Tracer,
    mirror: Option<MirrorQueue>,
    upstream: Arc<UpstreamClient>,
}

/// What every listener's proxy shares besides the snapshot store.
#[derive(Clone)]
pub(crate) struct Observability {
    pub shared: Shared,
    pub access_log: Option<Arc<AccessLog>>,
    pub tracer: Tracer,
    /// The shadow sender's queue.
    pub mirror: Option<MirrorQueue>,
    /// The pooled client of requests sent outside pingora's proxy loop
    /// (faulted streams).
    pub upstream: Arc<UpstreamClient>,
}

impl HttpProxy {
    pub(crate) fn new(
        listener: usize,
        store: Arc<SnapshotStore>,
        lifecycle: Arc<Lifecycle>,
        observability: Observability,
    ) -> Self {
        Self {
            listener,
            store,
            lifecycle,
            shared: observability.shared,
            access_log: observability.access_log,
            tracer: observability.tracer,
            mirror: observability.mirror,
            upstream: observability.upstream,
        }
    }

    /// Writes a proxy-generated JSON error, keeping the connection alive
    /// (pingora's own error responses force `Connection: close`).
    async fn respond_failure(&self, session: &mut Session, ctx: &mut RequestCtx, failure: Failure) {
        ctx.failure = Some(failure);
        if ctx.grpc {
            return respond_grpc_failure(session, ctx, failure).await;
        }
        let body = Bytes::from(error_body(failure, &ctx.request_id));
        let Ok(mut resp) = ResponseHeader::build(failure.status(), Some(4)) else {
            return;
        };
        let _ = resp.insert_header("content-type", "application/json");
        let _ = resp.insert_header("content-length", body.len());
        let _ = resp.insert_header("x-request-id", ctx.request_id.as_str());
        let _ = resp.insert_header("x-sluice-error", failure.reason());
        if let Some(secs) = failure.retry_after_secs() {
            let _ = resp.insert_header("retry-after", secs);
        }
        if session
            .write_response_header(Box::new(resp), false)
            .await
            .is_ok()
        {
            let _ = session.write_response_body(Some(body), true).await;
        }
    }
}

/// The model named by `telemetry.model_header`, if the config names one.
fn read_header_model(session: &Session, ctx: &mut RequestCtx) {
    if let Some(header) = &ctx.snapshot.config.telemetry.model_header {
        ctx.header_model = session
            .req_header()
            .headers
            .get(header.as_str())
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
    }
}

/// Puts the chosen target's `rewrite.model` in the body. Only a body read
/// early (one that fits the retry buffer) can be rewritten; a larger or
/// chunked one goes as sent.
async fn rewrite_model(session: &mut Session, ctx: &mut RequestCtx) {
    let Some(model) = ctx
        .snapshot
        .routes
        .get(ctx.route.unwrap_or(usize::MAX))
        .and_then(|r| r.targets.get(ctx.target?))
        .and_then(|t| t.rewrite_model.clone())
    else {
        return;
    };
    model_peek::read(session, ctx).await;
    ctx.rewritten_body = ctx
        .peeked_body
        .as_ref()
        .and_then(|b| sluice_filters::with_model(b, &model))
        .map(Bytes::from);
}

/// How long a proxy error on a gRPC call waits for the rest of the call's
/// request body before it answers anyway.
const GRPC_DRAIN: Duration = Duration::from_millis(200);

/// The `grpc-status` of an answer's headers or trailers.
pub(crate) fn grpc_status_of(headers: &http::HeaderMap) -> Option<u32> {
    headers
        .get("grpc-status")
        .and_then(|v| std::str::from_utf8(v.as_bytes()).ok())
        .and_then(|v| v.trim().parse().ok())
}

/// A proxy failure on a gRPC call, as gRPC clients read one: HTTP 200 and
/// trailers with `grpc-status` and `grpc-message`, the code from
/// the one mapping ([`Failure::grpc_status`]).
async fn respond_grpc_failure(session: &mut Session, ctx: &mut RequestCtx, failure: Failure) {
    let message = match (failure, ctx.cluster()) {
        (Failure::NeedsHttp2, Some(c)) => {
            format!("cluster `{}`: {}", c.config.name, failure.message())
        }
        _ => failure.message().to_string(),
    };
    let answer = GrpcAnswer {
        status: failure.grpc_status(),
        message: &message,
        header: ("x-sluice-error", failure.reason()),
    };
    respond_grpc(session, ctx, answer).await;
}

/// A gRPC status that sluice answers itself: a proxy failure, or an
/// injected `abort`.
pub(crate) struct GrpcAnswer<'a> {
    pub status: u32,
    /// Before percent-encoding.
    pub message: &'a str,
    /// The header that says why sluice answered (`x-sluice-error`,
    /// `x-sluice-fault`).
    pub header: (&'static str, &'a str),
}

/// Writes `answer` as gRPC clients read one: HTTP 200,
/// `content-type: application/grpc`, then trailers `grpc-status` and
/// `grpc-message`.
pub(crate) async fn respond_grpc(
    session: &mut Session,
    ctx: &mut RequestCtx,
    answer: GrpcAnswer<'_>,
) {
    ctx.grpc_status = Some(answer.status);
    let Ok(mut resp) = ResponseHeader::build(200, Some(5)) else {
        return;
    };
    // Read the call's own message to its end first: an HTTP/2 stream closed
    // while the client is still sending is reset (CANCEL), and gRPC clients
    // then report CANCELLED instead of the status. A client stream that does
    // not end soon is not waited for.
    if !session.as_mut().is_body_done() {
        let _ = tokio::time::timeout(GRPC_DRAIN, session.as_mut().drain_request_body()).await;
    }
    let _ = resp.insert_header("content-type", "application/grpc");
    let _ = resp.insert_header("x-request-id", ctx.request_id.as_str());
    let _ = resp.insert_header(answer.header.0, answer.header.1);
    // Headers then trailers: pingora ends an HTTP/2 answer with an empty
    // DATA frame, never on its HEADERS, so a trailers-only answer cannot be
    // written; gRPC reads the status from the trailers either way.
    let mut trailers = http::HeaderMap::new();
    if let (Ok(code), Ok(text)) = (
        http::HeaderValue::from_str(&answer.status.to_string()),
        http::HeaderValue::from_str(&grpc_message(answer.message)),
    ) {
        trailers.insert("grpc-status", code);
        trailers.insert("grpc-message", text);
    }
    if session
        .write_response_header(Box::new(resp), false)
        .await
        .is_ok()
    {
        let _ = session.as_mut().write_response_trailers(trailers).await;
    }
}

impl HttpProxy {
    /// Whether the request target is over the listener's `max_uri_bytes`.
    /// HTTP/1.1 heads are checked on the stream before pingora parses them
    /// (`listener_limits`); HTTP/2 ones arrive parsed, and are checked here.
    fn uri_too_long(&self, session: &Session, ctx: &RequestCtx) -> bool {
        let Some(listener) = ctx.snapshot.config.listeners.get(self.listener) else {
            return false;
        };
        let uri = &session.req_header().uri;
        uri.path_and_query().map_or(0, |p| p.as_str().len()) > listener.limits.head.max_uri_bytes
    }
}

#[async_trait]
impl ProxyHttp for HttpProxy {
    type CTX = RequestCtx;

    fn new_ctx(&self) -> RequestCtx {
        let mut ctx = RequestCtx::new(self.lifecycle.enter(), self.store.load());
        ctx.timed = self.access_log.is_some();
        ctx
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<bool> {
        ctx.request_id = request_id::take_or_make(session.req_header_mut());
        load::on_request(session, ctx, &self.shared.metrics);
        if session.is_http2() && self.uri_too_long(session, ctx) {
            self.respond_failure(session, ctx, Failure::UriTooLong)
                .await;
            return Ok(true);
        }
        // Keeps up to 64 KiB of the body so that a request sent on a pooled
        // connection that turns out dead can be replayed (see `error_while_proxy`).
        session.as_mut().enable_retry_buffering();
        if self.tracer.is_enabled() {
            let headers = &session.req_header().headers;
            ctx.trace = Some(self.tracer.begin(
                headers.get("traceparent").map(|v| v.as_bytes()),
                headers.get("tracestate").map(|v| v.as_bytes()),
            ));
        }
        let snapshot = ctx.snapshot.clone();
        let by_model = snapshot
            .routes_by_model
            .get(self.listener)
            .copied()
            .unwrap_or(false);
        if by_model {
            read_header_model(session, ctx);
            model_peek::read_if_needed(session, ctx, true).await;
        }
        let headers = &session.req_header().headers;
        ctx.grpc = is_grpc(headers.get("content-type").map(|v| v.as_bytes()));
        if ctx.grpc {
            ctx.grpc_timeout = headers
                .get("grpc-timeout")
                .and_then(|v| parse_grpc_timeout(v.as_bytes()));
        }
        let req = PingoraRequest(session.req_header());
        // Debug level: at the default level a span per request would format
        // its fields on every request only to decorate the "request done"
        // debug line (6% of the instructions per request under callgrind).
        ctx.span =
            debug_span!("request", id = %ctx.request_id, method = %req.0.method, path = req.path());
        let matched = snapshot.match_route_with_model(self.listener, &req, ctx.request_model());
        let Some(route_index) = matched else {
            self.respond_failure(session, ctx, Failure::NoRoute).await;
            return Ok(true);
        };
        ctx.route = Some(route_index);
        if max_body::declared_too_large(session, ctx) {
            self.respond_failure(session, ctx, Failure::BodyTooLarge)
                .await;
            max_body::linger(session).await;
            return Ok(true);
        }
        recording::on_route(ctx, self.shared.recorder.current(), session.req_header());
        if let shedding::Verdict::Answered = shedding::admit(session, ctx).await {
            return Ok(true);
        }
        let req = PingoraRequest(session.req_header());
        let target = snapshot.routes[route_index].pick_target(&req, rand::random());
        match target {
            Some(t) => {
                ctx.target = Some(t);
                mirror::on_route(ctx, session.req_header());
            }
            None => {
                self.respond_failure(session, ctx, Failure::NoCluster).await;
                return Ok(true);
            }
        }
        if !breakers::enter_request(ctx, &self.shared.metrics) {
            self.respond_failure(session, ctx, Failure::Overflow).await;
            return Ok(true);
        }
        if ctx.grpc
            && ctx
                .cluster()
                .is_some_and(|c| !c.config.protocol.allows_h2(c.config.tls.is_some()))
        {
            self.respond_failure(session, ctx, Failure::NeedsHttp2)
                .await;
            return Ok(true);
        }
        if ctx
            .cluster()
            .is_some_and(|c| c.config.kind == ClusterKind::Llm)
        {
            ctx.metered = true;
            ctx.operation = Operation::from_path(req.path());
            if !by_model {
                // Read already when routing by model.
                read_header_model(session, ctx);
            }
        }
        let listener = snapshot
            .config
            .listeners
            .get(self.listener)
            .map_or("", |l| l.name.as_str());
        model_peek::read_if_needed(session, ctx, false).await;
        rewrite_model(session, ctx).await;
        if let limits::Verdict::Answered =
            limits::admit(session, ctx, self.lifecycle.now_ms()).await
        {
            return Ok(true);
        }
        match faults::before_upstream(listener, &self.shared.metrics, session, ctx).await {
            faults::Verdict::Proceed => {}
            faults::Verdict::Answered => return Ok(true),
            faults::Verdict::Drop => return Err(faults::dropped()),
        }
        let Some(fault) = faults::stream_fault(listener, &self.shared.metrics, session, ctx) else {
            return Ok(false);
        };
        let now_ms = || self.lifecycle.now_ms();
        match stream_fault::serve(session, ctx, fault, &self.upstream, &now_ms).await {
            stream_fault::Ended::Done => Ok(true),
            stream_fault::Ended::Cut => {
                ctx.fault_dropped = true;
                Err(faults::dropped())
            }
            stream_fault::Ended::Failed(failure) => {
                self.respond_failure(session, ctx, failure).await;
                Ok(true)
            }
        }
    }

    async fn request_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        max_body::on_chunk(ctx, body.as_ref())?;
        if ctx.metered {
            metering::on_request_chunk(ctx, body.as_ref(), end_of_stream);
        }
        mirror::on_request_chunk(ctx, body.as_ref(), end_of_stream);
        recording::on_request_chunk(ctx, body.as_ref());
        // The peeked body is the whole body, sent as one chunk from the retry
        // buffer (again on a retry): that chunk is swapped, nothing else.
        if let Some(rewritten) = &ctx.rewritten_body {
            if body.as_ref().is_some_and(|b| !b.is_empty()) {
                *body = Some(rewritten.clone());
            }
        }
        Ok(())
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        ctx: &mut RequestCtx,
    ) -> Result<Box<HttpPeer>> {
        let Some(cluster) = ctx.cluster().cloned() else {
            return Error::e_explain(ErrorType::InternalError, "no cluster chosen");
        };
        let Some(i) = cluster
            .endpoints
            .pick(self.lifecycle.now_ms(), ctx.tried.bits())
        else {
            return Error::e_explain(ErrorType::ConnectError, "every endpoint failed");
        };
        ctx.endpoint = Some(i);
        breakers::enter_pending(ctx, &self.shared.metrics)?;
        ctx.upstream_timing.peer = ctx.stamp();
        mirror::on_attempt(ctx);
        // A retried attempt sends the body again from its start.
        ctx.request_body_bytes = 0;
        ctx.upstream_answered = false;
        if ctx.trace.is_some() {
            ctx.connect_started = Some(std::time::SystemTime::now());
        }
        match upstream::peer(&cluster, i, &self.shared.metrics) {
            Some(mut peer) => {
                if let Some(deadline) = ctx.grpc_timeout {
                    // The call's own deadline, never longer than the cluster's.
                    let cap = cluster.config.timeouts.first_byte;
                    peer.options.read_timeout = Some(deadline.min(cap));
                }
                Ok(Box::new(peer))
            }
            None => Error::e_explain(ErrorType::InternalError, "endpoint out of range"),
        }
    }

    async fn upstream_request_filter(
        &self,
        _session: &mut Session,
        upstream_request: &mut pingora::http::RequestHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        if let Some(rewritten) = &ctx.rewritten_body {
            upstream_request.insert_header("content-length", rewritten.len())?;
        }
        if let Some(trace) = ctx.trace.as_mut() {
            // Each attempt is a client span of its own, and the upstream's
            // parent is that span.
            let attempt = trace.next_attempt();
            upstream_request.insert_header("traceparent", attempt.traceparent.as_str())?;
            if let Some(state) = &trace.tracestate {
                upstream_request.insert_header("tracestate", state.as_str())?;
            }
            let address = ctx
                .cluster()
                .zip(ctx.endpoint)
                .and_then(|(c, i)| c.config.endpoints.get(i).map(|e| e.addr));
            let now = std::time::SystemTime::now();
            ctx.attempts.push(Attempt {
                span_id: attempt.span_id,
                start: now,
                end: now,
                address,
                error: None,
            });
        }
        Ok(())
    }

    async fn connected_to_upstream(
        &self,
        _session: &mut Session,
        reused: bool,
        _peer: &HttpPeer,
        #[cfg(unix)] _fd: std::os::unix::io::RawFd,
        #[cfg(windows)] _sock: std::os::windows::io::RawSocket,
        _digest: Option<&pingora::protocols::Digest>,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        breakers::leave_pending(ctx);
        if let Some(at) = ctx.stamp() {
            ctx.upstream_timing.connected = Some(at);
            ctx.upstream_timing.reused = Some(reused);
        }
        Ok(())
    }

    async fn upstream_response_filter(
        &self,
        _session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        ctx.upstream_timing.header = ctx.stamp();
        outlier::on_answer(
            ctx,
            upstream_response.status.as_u16(),
            self.lifecycle.now_ms(),
            &self.shared.metrics,
        );
        ctx.end_attempt(None);
        Ok(())
    }

    fn error_while_proxy(
        &self,
        peer: &HttpPeer,
        session: &mut Session,
        e: Box<Error>,
        ctx: &mut RequestCtx,
        client_reused: bool,
    ) -> Box<Error> {
        // pingora never retries a POST. But a pooled connection the model server
        // closed while idle fails before any answer byte, on reuse only
        // (`ReusedOnly`): the request never reached the server, so it is safe to
        // send again on a fresh connection, whatever the method. Every LLM call
        // is a POST, and servers close idle keep-alives all the time.
        ctx.end_attempt(Some(e.etype().as_str().to_string()));
        let mut e = e.more_context(format!("peer: {peer}"));
        if session.as_ref().retry_buffer_truncated() {
            e.set_retry(false);
        } else {
            e.retry.decide_reuse(client_reused);
            if matches!(e.retry, RetryType::Decided(true))
                && !breakers::may_retry(ctx, &self.shared.metrics)
            {
                e.set_retry(false);
            }
        }
        e
    }

    fn fail_to_connect(
        &self,
        _session: &mut Session,
        peer: &HttpPeer,
        ctx: &mut RequestCtx,
        mut e: Box<Error>,
    ) -> Box<Error> {
        breakers::leave_pending(ctx);
        if let Some(trace) = ctx.trace.as_mut() {
            // A failed connect is an attempt too: nothing was sent, but it cost time.
            let now = std::time::SystemTime::now();
            ctx.attempts.push(Attempt {
                span_id: trace.next_attempt().span_id,
                start: ctx.connect_started.unwrap_or(now),
                end: now,
                address: pingora::upstreams::peer::Peer::address(peer)
                    .as_inet()
                    .copied(),
                error: Some(e.etype().as_str().to_string()),
            });
        }
        if upstream::is_overflow(&e) {
            // The cluster's `max_connections`, not the endpoint's fault:
            // nothing to eject, and no other endpoint would do better.
            e.set_retry(false);
            return e;
        }
        if let (Some(cluster), Some(i)) = (ctx.cluster().cloned(), ctx.endpoint) {
            ctx.tried.mark(i);
            let now = self.lifecycle.now_ms();
            cluster.endpoints.eject(i, now, EJECTION.as_millis() as u64);
            debug!(cluster = %cluster.config.name, endpoint = i, "endpoint ejected after connect failure");
            // Another endpoint is worth a try; a request is never sent twice
            // to one that refused it.
            e.set_retry(ctx.tried.any_left(cluster.endpoints.len()));
        }
        e
    }

    async fn response_filter(
        &self,
        session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        if let (Some(cluster), Some(i)) = (ctx.cluster(), ctx.endpoint) {
            // An answer ends a connect failure's ejection; under outlier
            // detection a 5xx is no sign of health (it may just have ejected).
            let failed = upstream_response.status.as_u16() >= 500;
            if !failed || cluster.config.outlier_detection.is_none() {
                cluster.endpoints.restore(i);
            }
        }
        ctx.read_kvcache_ratio(&self.shared.kv_cache);
        upstream_response.insert_header("x-request-id", ctx.request_id.as_str())?;
        load::on_response(upstream_response, ctx)?;
        if let Some(rate) = &ctx.rate_headers {
            limits::insert_headers(upstream_response, rate);
        }
        if ctx.grpc {
            ctx.grpc_status = grpc_status_of(&upstream_response.headers);
        }
        if ctx.metered {
            let headers = &upstream_response.headers;
            let encoded = headers
                .get("content-encoding")
                .is_some_and(|e| e.as_bytes() != b"identity");
            let content_type = headers.get("content-type").map(|v| v.as_bytes());
            metering::on_response_head(ctx, session.req_header().uri.path(), content_type, encoded);
        }
        if self.lifecycle.is_draining() {
            // Tell keep-alive clients to reconnect elsewhere while we drain.
            session.set_keepalive(None);
        }
        Ok(())
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut RequestCtx,
    ) -> FailToProxy {
        if ctx.fault_dropped {
            return FailToProxy {
                error_code: 0,
                can_reuse_downstream: false,
            };
        }
        let failure = errors::classify(e);
        let written = session.response_written().is_some();
        let error_code = match failure {
            // The client is gone or sent garbage it will not read an answer to.
            None => 0,
            Some(f) if written => {
                ctx.failure = Some(f);
                0
            }
            Some(f) => {
                self.respond_failure(session, ctx, f).await;
                if f == Failure::BodyTooLarge {
                    max_body::linger(session).await;
                }
                f.status()
            }
        };
        FailToProxy {
            error_code,
            // The rest of a refused body is still on the connection.
            can_reuse_downstream: error_code != 0 && ctx.failure != Some(Failure::BodyTooLarge),
        }
    }

    fn response_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> Result<Option<Duration>> {
        metering::on_response_chunk(ctx, body.as_ref(), end_of_stream);
        mirror::on_response_chunk(ctx, body.as_ref());
        Ok(None)
    }

    fn upstream_response_trailer_filter(
        &self,
        _session: &mut Session,
        upstream_trailers: &mut http::HeaderMap,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        if ctx.grpc {
            if let Some(status) = grpc_status_of(upstream_trailers) {
                ctx.grpc_status = Some(status);
            }
        }
        Ok(())
    }

    fn suppress_error_log(&self, _session: &Session, _ctx: &RequestCtx, _error: &Error) -> bool {
        // `logging` records every failure with its reason; pingora's own line
        // would repeat it without the route.
        true
    }

    async fn logging(&self, session: &mut Session, e: Option<&Error>, ctx: &mut RequestCtx) {
        // A stream cut short never reached end_of_stream: close its meter now.
        metering::finish(ctx, ctx.started.elapsed());
        let status = match (ctx.grpc, ctx.failure, ctx.injected_status) {
            // A gRPC error goes out as HTTP 200; outcomes count it as the
            // failure it is, an injected one as the abort's HTTP status.
            (true, Some(f), _) => f.status(),
            (true, None, Some(s)) => s,
            _ => session
                .response_written()
                .map(|r| r.status.as_u16())
                .or(ctx.failure.map(Failure::status))
                .unwrap_or(0),
        };
        limits::settle(ctx, status, self.lifecycle.now_ms());
        outlier::on_end(ctx, self.lifecycle.now_ms(), &self.shared.metrics);
        let body_done = session.as_mut().is_body_done();
        let req = session.req_header();
        outcome::record(self, ctx, req, status);
        mirror::on_done(ctx, self.mirror.as_ref(), req, status, body_done);
        let _enter = ctx.span.enter();
        debug!(
            status,
            latency_us = ctx.started.elapsed().as_micros() as u64,
            route = ctx.route_name().unwrap_or(""),
            cluster = ctx.cluster().map_or("", |c| c.config.name.as_str()),
            error = e.map(|e| e.etype().as_str()).unwrap_or(""),
            "request done"
        );
    }
}
