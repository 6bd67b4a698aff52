//! Sending the copies of one job and reading their answers to the end,
//! metered like the primary's.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::header::{HeaderName, HeaderValue};
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use sluice_control::{ClusterKind, ClusterRuntime};
use sluice_filters::{Dialect, MirrorResult, TokenMeter, TraceContext, HOP_BY_HOP};

use super::job::Job;
use super::limits::{Admitted, CopyKind};

/// Answer bytes kept for the comparison; a longer answer is read to its
/// end but compared by status, timing and tokens only.
pub const COMPARE_LIMIT: usize = 256 * 1024;
/// Connecting to a shadow endpoint; the copy's `timeout` bounds the rest.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// A pooled shadow connection idle longer than this is not reused. Servers
/// close idle keep-alive connections (llama.cpp's after 5 s), and a sender
/// slow to run on a loaded machine may not have seen the close yet when it
/// picks the connection for the next copy, which then fails. Staying well
/// under common server idle timeouts avoids reusing a connection mid-close.
const POOL_IDLE: Duration = Duration::from_secs(2);
/// A down endpoint is not tried for this long: its copies count as
/// `connect_error` at once, so a dead shadow costs no syscalls.
const DOWN_FOR: Duration = Duration::from_secs(1);
/// An endpoint is down after a failed connect, or after this many exchanges
/// in a row that broke (reset, garbage), like an outlier ejection.
const ERRORS_TO_DOWN: u32 = 5;

/// One copy's answer, read whole.
#[derive(Default)]
pub struct CopyAnswer {
    pub cluster: String,
    pub status: u16,
    pub latency: Duration,
    pub ttft: Option<Duration>,
    pub output_tokens: Option<u64>,
    pub body: Vec<Bytes>,
    pub bytes: usize,
    pub truncated: bool,
}

pub type CopyResult = (CopyKind, Result<CopyAnswer, MirrorResult>);

/// The sender's pooled client, shared by every copy.
#[derive(Clone)]
pub struct Shadow {
    client: Client<HttpConnector, Full<Bytes>>,
    next_endpoint: Arc<AtomicUsize>,
    /// Endpoints' recent failures. Touched by the sender's tasks only,
    /// never across an await.
    health: Arc<Mutex<HashMap<SocketAddr, Health>>>,
}

#[derive(Default)]
struct Health {
    errors_in_a_row: u32,
    down_until: Option<Instant>,
}

impl Shadow {
    pub fn new() -> Shadow {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(POOL_IDLE)
            .build(connector);
        Shadow {
            client,
            next_endpoint: Arc::new(AtomicUsize::new(0)),
            health: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Sends every admitted copy of `job` at once and waits for them all.
    pub async fn send_all(&self, job: Arc<Job>, admitted: Vec<Admitted>) -> Vec<CopyResult> {
        let rewritten = shadow_body(&job);
        let plain = join(&job.body);
        let mut copies = tokio::task::JoinSet::new();
        for a in admitted {
            let (body, marker) = match a.kind {
                CopyKind::Shadow(n) => (rewritten.clone(), n.to_string()),
                CopyKind::Noise(_) => (plain.clone(), "noise".to_string()),
            };
            let shadow = self.clone();
            let job = job.clone();
            copies.spawn(async move {
                let cluster = match a.kind {
                    CopyKind::Shadow(_) => Some(&job.policy.shadow),
                    CopyKind::Noise(_) => job.primary_cluster.as_ref(),
                };
                let result = match cluster {
                    Some(cluster) => shadow.send(&job, cluster, body, &marker).await,
                    None => Err(MirrorResult::Error),
                };
                if result.is_err() && matches!(a.kind, CopyKind::Shadow(_)) {
                    shadow.close_gate_if_all_down(&job);
                }
                // The in-flight slot is held until the answer is read.
                let kind = a.kind;
                drop(a);
                (kind, result)
            });
        }
        let mut results = Vec::new();
        while let Some(done) = copies.join_next().await {
            if let Ok(result) = done {
                results.push(result);
            }
        }
        results
    }

    async fn send(
        &self,
        job: &Job,
        cluster: &ClusterRuntime,
        body: Bytes,
        marker: &str,
    ) -> Result<CopyAnswer, MirrorResult> {
        let parent = job
            .headers
            .get("traceparent")
            .and_then(|v| TraceContext::parse(v.as_bytes()));
        let endpoints = &cluster.config.endpoints;
        if endpoints.is_empty() {
            return Err(MirrorResult::ConnectError);
        }
        let endpoint =
            &endpoints[self.next_endpoint.fetch_add(1, Ordering::Relaxed) % endpoints.len()];
        if self.is_down(endpoint.addr) {
            return Err(MirrorResult::ConnectError);
        }
        let uri = format!("http://{}{}", endpoint.addr, job.path);
        let mut req = Request::builder()
            .method(job.method.clone())
            .uri(uri)
            .body(Full::new(body))
            .map_err(|_| MirrorResult::Error)?;
        let headers = req.headers_mut();
        for (name, value) in &job.headers {
            if !HOP_BY_HOP.contains(&name.as_str()) {
                headers.append(name, value.clone());
            }
        }
        for (name, value) in &job.policy.config.rewrite_headers {
            if let (Ok(n), Ok(v)) = (
                HeaderName::try_from(name.as_str()),
                HeaderValue::try_from(value.as_str()),
            ) {
                headers.insert(n, v);
            }
        }
        if let Ok(v) = HeaderValue::try_from(marker) {
            headers.insert("x-sluice-shadow", v);
        }
        if let Ok(v) = HeaderValue::try_from(child_traceparent(parent.as_ref())) {
            headers.insert("traceparent", v);
        }
        let started = Instant::now();
        let metered = cluster.config.kind == ClusterKind::Llm;
        let exchange = async {
            let resp = self.client.request(req).await.map_err(|e| {
                if e.is_connect() {
                    MirrorResult::ConnectError
                } else {
                    MirrorResult::Error
                }
            })?;
            let status = resp.status().as_u16();
            let dialect = if metered {
                let ct = resp.headers().get("content-type").map(|v| v.as_bytes());
                Dialect::detect(&job.path, ct)
            } else {
                Dialect::Unknown
            };
            let mut meter = TokenMeter::new(dialect);
            let mut answer = CopyAnswer {
                cluster: cluster.config.name.clone(),
                status,
                ..CopyAnswer::default()
            };
            let mut body = resp.into_body();
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|_| MirrorResult::Error)?;
                if let Ok(chunk) = frame.into_data() {
                    meter.feed(&chunk, started.elapsed());
                    answer.bytes += chunk.len();
                    if answer.bytes <= COMPARE_LIMIT {
                        answer.body.push(chunk);
                    } else {
                        answer.truncated = true;
                    }
                }
            }
            answer.latency = started.elapsed();
            let summary = meter.finish(answer.latency);
            answer.ttft = summary.first_content_at;
            answer.output_tokens = summary.output_tokens;
            Ok(answer)
        };
        let result = match tokio::time::timeout(job.policy.config.timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(MirrorResult::Timeout),
        };
        self.record(endpoint.addr, result.as_ref().err().copied());
        result
    }
}

impl Shadow {
    pub(super) fn is_down(&self, addr: SocketAddr) -> bool {
        let health = self.health.lock().unwrap_or_else(|p| p.into_inner());
        health
            .get(&addr)
            .and_then(|h| h.down_until)
            .is_some_and(|until| Instant::now() < until)
    }

    /// Keeps an exchange's outcome (`None` = answered). A timeout says the
    /// shadow is slow, not broken: `max_in_flight` bounds what that costs.
    pub(super) fn record(&self, addr: SocketAddr, failure: Option<MirrorResult>) {
        let mut health = self.health.lock().unwrap_or_else(|p| p.into_inner());
        let h = health.entry(addr).or_default();
        match failure {
            None => *h = Health::default(),
            Some(MirrorResult::ConnectError) => h.down_until = Some(Instant::now() + DOWN_FOR),
            Some(MirrorResult::Error) => {
                h.errors_in_a_row += 1;
                if h.errors_in_a_row >= ERRORS_TO_DOWN {
                    h.errors_in_a_row = 0;
                    h.down_until = Some(Instant::now() + DOWN_FOR);
                }
            }
            Some(_) => {}
        }
    }

    /// When a copy failed and every endpoint of the shadow cluster is now
    /// down, closes the route's gate until the first of them is due back.
    fn close_gate_if_all_down(&self, job: &Arc<Job>) {
        let now = Instant::now();
        let back_at = {
            let health = self.health.lock().unwrap_or_else(|p| p.into_inner());
            let mut back_at: Option<Instant> = None;
            for e in &job.policy.shadow.config.endpoints {
                match health.get(&e.addr).and_then(|h| h.down_until) {
                    Some(until) if until > now => {
                        back_at = Some(back_at.map_or(until, |b| b.min(until)));
                    }
                    _ => return,
                }
            }
            back_at
        };
        let Some(back_at) = back_at else { return };
        if job.policy.gate.close(MirrorResult::ShadowDown) {
            let policy = job.policy.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until(back_at.into()).await;
                policy.gate.open(MirrorResult::ShadowDown);
            });
        }
    }
}

/// The body chunks as one buffer (a refcount when there is one chunk).
fn join(chunks: &[Bytes]) -> Bytes {
    match chunks {
        [] => Bytes::new(),
        [one] => one.clone(),
        many => {
            let mut all = BytesMut::with_capacity(many.iter().map(Bytes::len).sum());
            for c in many {
                all.extend_from_slice(c);
            }
            all.freeze()
        }
    }
}

/// The body shadow copies carry: the client's, with `rewrite.model` put in
/// its JSON `model` field. A body that is not a JSON object goes unchanged.
pub(super) fn shadow_body(job: &Job) -> Bytes {
    let body = join(&job.body);
    let Some(model) = &job.policy.config.rewrite_model else {
        return body;
    };
    match serde_json::from_slice::<serde_json::Value>(&body) {
        Ok(serde_json::Value::Object(mut map)) => {
            map.insert("model".into(), serde_json::Value::String(model.clone()));
            serde_json::to_vec(&map).map_or(body, Bytes::from)
        }
        _ => body,
    }
}

/// A `traceparent` for a copy: a child of the client's span when it sent
/// one (same trace, new span), else the root of a new trace, not sampled.
pub(super) fn child_traceparent(parent: Option<&TraceContext>) -> String {
    let span_id = nonzero(rand::random::<[u8; 8]>());
    let context = match parent {
        Some(p) => TraceContext {
            trace_id: p.trace_id,
            span_id,
            sampled: p.sampled,
        },
        None => TraceContext {
            trace_id: nonzero(rand::random::<[u8; 16]>()),
            span_id,
            sampled: false,
        },
    };
    context.to_traceparent()
}

/// W3C ids must not be all zeros.
fn nonzero<const N: usize>(mut id: [u8; N]) -> [u8; N] {
    if id.iter().all(|b| *b == 0) {
        id[N - 1] = 1;
    }
    id
}
