//! The per-request context: the snapshot the request started with, and what
//! has been decided for it so far.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use sluice_control::{Admission, ClusterRuntime, KvCacheReadings, RouteLimits, Snapshot};
use sluice_filters::{
    BreakerSlot, Failure, Operation, RateHeaders, RequestInfo, Source, TokenMeter, TokenOutcome,
    UpstreamTiming,
};

use super::mirror::MirrorCapture;
use super::recording::Recording;
use crate::lifecycle::InflightGuard;
use crate::telemetry::{Attempt, RequestTrace};
use crate::upstream::Tried;

pub(crate) struct RequestCtx {
    /// Loaded once; the request finishes on it even if a swap happens.
    pub snapshot: Arc<Snapshot>,
    pub started: Instant,
    pub request_id: String,
    /// Index into `snapshot.routes`.
    pub route: Option<usize>,
    /// Index into the route's targets.
    pub target: Option<usize>,
    /// Index into the cluster's endpoints of the current attempt.
    pub endpoint: Option<usize>,
    /// The endpoints this request could not connect to.
    pub tried: Tried,
    /// Set when the proxy answered (or aborted) the request itself.
    pub failure: Option<Failure>,
    pub span: tracing::Span,
    /// LLM answers are metered; everything else passes untouched.
    pub metered: bool,
    pub operation: Operation,
    /// The model named by the configured header, if any.
    pub header_model: Option<String>,
    /// The first request body chunks, up to the scan limit (refcounted, not copied).
    pub request_head: Vec<Bytes>,
    pub request_head_len: usize,
    pub request_info: Option<RequestInfo>,
    /// The body read before the upstream was chosen (`model_peek.rs`);
    /// pingora sends it upstream from its retry buffer.
    pub peeked_body: Option<bytes::Bytes>,
    /// Body bytes sent upstream by this attempt, against the route's `max_body`.
    pub request_body_bytes: u64,
    /// The upstream answered (a head came back) on the last attempt.
    pub upstream_answered: bool,
    /// A place among the cluster's `max_requests`, to the request's end.
    pub request_slot: Option<BreakerSlot>,
    /// A place among its `max_pending`, while waiting for a connection.
    pub pending_slot: Option<BreakerSlot>,
    /// A place among the cluster's retries in flight, once it retried.
    pub retry_slot: Option<BreakerSlot>,
    /// The peeked body with the target's `rewrite.model` put in; sent in
    /// its place (`request_body_filter`), its length in `content-length`.
    pub rewritten_body: Option<bytes::Bytes>,
    /// The route's rate limit budget this request holds, settled in `logging`.
    pub admission: Option<(Arc<RouteLimits>, Admission)>,
    /// The `x-ratelimit-*` values of an admitted request, for its answer.
    pub rate_headers: Option<RateHeaders>,
    pub meter: Option<TokenMeter>,
    pub last_content_at: Option<Duration>,
    pub gaps: Vec<Duration>,
    pub tokens: Option<TokenOutcome>,
    /// Wall-clock start, for spans.
    pub started_at: SystemTime,
    /// Set only when tracing is on.
    pub trace: Option<RequestTrace>,
    pub attempts: Vec<Attempt>,
    /// When the current endpoint was picked, for a failed connect's span.
    pub connect_started: Option<SystemTime>,
    /// Set when a fault drops the client's connection unanswered.
    pub fault_dropped: bool,
    /// Set when this request is mirrored (see `mirror.rs`).
    pub mirror: Option<Box<MirrorCapture>>,
    /// Set when the recorder records this request (see `recording.rs`).
    pub recording: Option<Box<Recording>>,
    /// Kept only when `timed` (an access log is on): three clock reads.
    pub timed: bool,
    pub upstream_timing: UpstreamTiming,
    /// The `sluice load` run, when the request's `x-sluice-load` mark came
    /// from a trusted peer (see `load.rs`).
    pub load_run: Option<String>,
    /// The request is a gRPC call (`content-type: application/grpc...`):
    /// the proxy's own errors are written as gRPC statuses.
    pub grpc: bool,
    /// The call's `grpc-timeout`, when it sent one.
    pub grpc_timeout: Option<Duration>,
    /// The answer's `grpc-status`, from its headers (trailers-only) or trailers.
    pub grpc_status: Option<u32>,
    /// The HTTP status an injected gRPC `abort` counts as in outcomes (the
    /// client got HTTP 200 and a `grpc-status`).
    pub injected_status: Option<u16>,
    /// The serving endpoint's KV-cache ratio as last scraped, read once
    /// when its answer's head arrives (or at the end, if none did).
    pub kvcache_ratio: Option<f64>,
    _inflight: InflightGuard,
}

impl RequestCtx {
    pub(crate) fn new(inflight: InflightGuard, snapshot: Arc<Snapshot>) -> Self {
        Self {
            snapshot,
            started: Instant::now(),
            request_id: String::new(),
            route: None,
            target: None,
            endpoint: None,
            tried: Tried::default(),
            failure: None,
            span: tracing::Span::none(),
            metered: false,
            operation: Operation::Other,
            header_model: None,
            request_head: Vec::new(),
            request_head_len: 0,
            request_info: None,
            peeked_body: None,
            request_body_bytes: 0,
            upstream_answered: false,
            request_slot: None,
            pending_slot: None,
            retry_slot: None,
            rewritten_body: None,
            admission: None,
            rate_headers: None,
            meter: None,
            last_content_at: None,
            gaps: Vec::new(),
            tokens: None,
            started_at: SystemTime::now(),
            trace: None,
            attempts: Vec::new(),
            connect_started: None,
            fault_dropped: false,
            mirror: None,
            recording: None,
            timed: false,
            upstream_timing: UpstreamTiming::default(),
            load_run: None,
            grpc: false,
            grpc_timeout: None,
            grpc_status: None,
            injected_status: None,
            kvcache_ratio: None,
            _inflight: inflight,
        }
    }

    /// Time since the request started, when its upstream timing is kept.
    pub(crate) fn stamp(&self) -> Option<Duration> {
        self.timed.then(|| self.started.elapsed())
    }

    pub(crate) fn cluster(&self) -> Option<&Arc<ClusterRuntime>> {
        let route = self.snapshot.routes.get(self.route?)?;
        let target = route.targets.get(self.target?)?;
        self.snapshot.clusters.get(target.cluster)
    }

    /// Closes the current upstream attempt's span (its end, and why it failed).
    pub(crate) fn end_attempt(&mut self, error: Option<String>) {
        if let Some(a) = self.attempts.last_mut() {
            if a.end <= a.start {
                a.end = SystemTime::now();
                a.error = error;
            }
        }
    }

    /// The model the request names: the body's, else the model header's.
    /// Fault experiments, `match.model` and limits keyed by model read it.
    pub(crate) fn request_model(&self) -> Option<&str> {
        self.request_info
            .as_ref()
            .and_then(|i| i.model.as_deref())
            .or(self.header_model.as_deref())
    }

    /// The model for labels: [`RequestCtx::request_model`], else "unknown".
    pub(crate) fn model(&self) -> &str {
        self.request_model().unwrap_or("unknown")
    }

    /// Whose traffic this is, for the `source` label.
    pub(crate) fn source(&self) -> Source {
        if self.load_run.is_some() {
            Source::Load
        } else {
            Source::User
        }
    }

    /// Reads the current endpoint's KV-cache ratio from the scrape's
    /// published table (lock-free; skipped for a cluster not scraped).
    pub(crate) fn read_kvcache_ratio(&mut self, readings: &KvCacheReadings) {
        let Some(cluster) = self.cluster() else {
            return;
        };
        if cluster.config.metrics_path.is_none() {
            return;
        }
        let Some(endpoint) = self.endpoint.and_then(|i| cluster.config.endpoints.get(i)) else {
            return;
        };
        self.kvcache_ratio = readings.ratio(&cluster.config.name, endpoint.addr);
    }

    pub(crate) fn route_name(&self) -> Option<&str> {
        Some(self.snapshot.routes.get(self.route?)?.name.as_str())
    }
}
