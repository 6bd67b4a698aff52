//! Sending the copies of one job and reading their answers to the end,
//! metered like the primary's. Copies go through an [`UpstreamClient`] of
//! the sender's own: the proxy's connector code (peer, TLS, retry rule) with
//! a pool apart from the proxy's, and the sender's own endpoint health.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::header::{HeaderName, HeaderValue};
use sluice_control::{ClusterKind, ClusterRuntime, Config};
use sluice_filters::{
    Dialect, Failure, Metrics, MirrorResult, TokenMeter, TraceContext, PERTURBED_HEADER,
};

use super::health::{Health, DOWN_FOR};
use super::job::{Answer, Job};
use super::limits::{Admitted, CopyKind};
use crate::http_proxy::grpc_status_of;
use crate::upstream::{self, CaError, Policy, Target, UpstreamClient};

/// Answer bytes kept for the comparison; a longer answer is read to its
/// end but compared by status, timing and tokens only.
pub(super) const COMPARE_LIMIT: usize = 256 * 1024;
/// An embeddings answer longer than this is not read (a batch of a few
/// answers, each a vector of a few thousand floats, is far less).
const EMBEDDING_LIMIT: usize = 16 * 1024 * 1024;
/// Connecting to a shadow endpoint; the copy's `timeout` bounds the rest.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// A pooled shadow connection idle longer than this is not reused. Servers
/// close idle keep-alive connections (llama.cpp's after 5 s), and a sender
/// slow to run on a loaded machine may not have seen the close yet when it
/// picks the connection for the next copy, which then fails. Staying well
/// under common server idle timeouts avoids reusing a connection mid-close.
const POOL_IDLE: Duration = Duration::from_secs(2);

/// The sender's rules: its own timeouts, and a down endpoint is not tried.
const POLICY: Policy = Policy {
    ejection: DOWN_FOR,
    try_ejected: false,
    connect_timeout: Some(CONNECT_TIMEOUT),
    idle_timeout: Some(POOL_IDLE),
};

/// One copy's answer, read whole, and the cluster that gave it.
pub(super) struct CopyAnswer {
    pub cluster: String,
    pub answer: Answer,
    /// The copy's prompt was perturbed (`mirror.perturb`).
    pub perturbed: bool,
}

pub(super) type CopyResult = (CopyKind, Result<CopyAnswer, MirrorResult>);

/// The sender's pooled client, shared by every copy.
#[derive(Clone)]
pub(super) struct Shadow {
    client: Arc<UpstreamClient>,
    health: Health,
}

impl Shadow {
    pub(super) fn new(config: &Config, metrics: Arc<Metrics>) -> Result<Shadow, CaError> {
        Ok(Shadow {
            client: UpstreamClient::new(config, metrics)?,
            health: Health::new(),
        })
    }

    /// Sends every admitted copy of `job` at once and waits for them all.
    pub(super) async fn send_all(&self, job: Arc<Job>, admitted: Vec<Admitted>) -> Vec<CopyResult> {
        let rewritten = shadow_body(&job);
        let plain = join(&job.body);
        let mut copies = tokio::task::JoinSet::new();
        for a in admitted {
            let (body, marker, perturbed) = match a.kind {
                CopyKind::Shadow(n) => match perturbed_body(&job, &rewritten, n) {
                    Some(body) => (body, n.to_string(), true),
                    None => (rewritten.clone(), n.to_string(), false),
                },
                CopyKind::Noise(_) => (plain.clone(), "noise".to_string(), false),
                // Admitted apart, after the copies (`embed`).
                CopyKind::Embedding => continue,
            };
            let shadow = self.clone();
            let job = job.clone();
            copies.spawn(async move {
                let cluster = match a.kind {
                    CopyKind::Shadow(_) => Some(&job.policy.shadow),
                    CopyKind::Noise(_) => job.primary_cluster.as_ref(),
                    CopyKind::Embedding => None,
                };
                let result = match cluster {
                    Some(cluster) => shadow.send(&job, cluster, body, &marker, perturbed).await,
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
        perturbed: bool,
    ) -> Result<CopyAnswer, MirrorResult> {
        let parent = job
            .headers
            .get("traceparent")
            .and_then(|v| TraceContext::parse(v.as_bytes()));
        let authority = job.authority.as_deref();
        let mut head =
            upstream::request_head(&job.method, &job.path, &job.headers, authority, body.len())
                .ok_or(MirrorResult::Error)?;
        for (name, value) in &job.policy.config.rewrite_headers {
            if let (Ok(n), Ok(v)) = (
                HeaderName::try_from(name.as_str()),
                HeaderValue::try_from(value.as_str()),
            ) {
                let _ = head.insert_header(n, v);
            }
        }
        let _ = head.insert_header("x-sluice-shadow", marker);
        if let Some(p) = job.policy.config.perturb.as_ref().filter(|_| perturbed) {
            let _ = head.insert_header(PERTURBED_HEADER, p.rate.to_string());
        }
        let _ = head.insert_header("traceparent", child_traceparent(parent.as_ref()));
        let endpoints = self.health.of(&cluster.config);
        let now_ms = || self.health.now_ms();
        let target = Target {
            cluster,
            endpoints: &endpoints.set,
            now_ms: &now_ms,
            policy: POLICY,
        };
        let started = Instant::now();
        let metered = cluster.config.kind == ClusterKind::Llm;
        // The endpoint that answered (or failed), for the health record.
        let mut used = None;
        let exchange = async {
            let mut answer = self
                .client
                .send(&target, &head, &body, None)
                .await
                .map_err(|failed| {
                    used = failed.endpoint;
                    result_of(failed.failure)
                })?;
            used = Some(answer.endpoint());
            let status = answer.head().status.as_u16();
            let dialect = if metered {
                let ct = answer
                    .head()
                    .headers
                    .get("content-type")
                    .map(|v| v.as_bytes());
                Dialect::detect(&job.path, ct)
            } else {
                Dialect::Unknown
            };
            let mut meter = TokenMeter::new(dialect);
            let mut copy = Answer {
                status,
                ..Answer::default()
            };
            while let Some(chunk) = answer.read().await.map_err(result_of)? {
                meter.feed(&chunk, started.elapsed());
                copy.bytes += chunk.len();
                if copy.bytes <= COMPARE_LIMIT {
                    copy.body.push(chunk);
                } else {
                    copy.truncated = true;
                }
            }
            copy.grpc_status = answer
                .trailers()
                .and_then(grpc_status_of)
                .or_else(|| grpc_status_of(&answer.head().headers));
            answer.finish().await;
            copy.latency = started.elapsed();
            let summary = meter.finish(copy.latency);
            copy.ttft = summary.first_content_at;
            copy.output_tokens = summary.output_tokens;
            Ok(CopyAnswer {
                cluster: cluster.config.name.clone(),
                answer: copy,
                perturbed,
            })
        };
        let result = match tokio::time::timeout(job.policy.config.timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(MirrorResult::Timeout),
        };
        if let Some(i) = used {
            self.health
                .record(&endpoints, i, result.as_ref().err().copied());
        }
        result
    }

    /// POSTs a JSON `body` to `path` on `cluster` (the embedder): its status
    /// and body (up to [`EMBEDDING_LIMIT`]), or `None` when it failed
    /// or was longer.
    pub(super) async fn post_json(
        &self,
        cluster: &ClusterRuntime,
        path: &str,
        body: Bytes,
    ) -> Option<(u16, Bytes)> {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        // HTTP/1.1 needs a Host, and a request sluice makes itself has no
        // client's (nginx and vLLM's uvicorn refuse one without: 400). The
        // cluster's first endpoint names it: a plain-HTTP embedder serves
        // any name, and the endpoint is chosen only when sending.
        let host = cluster.config.endpoints.first().map(|e| e.addr.to_string());
        let head = upstream::request_head(
            &http::Method::POST,
            path,
            &headers,
            host.as_deref(),
            body.len(),
        )?;
        let endpoints = self.health.of(&cluster.config);
        let now_ms = || self.health.now_ms();
        let target = Target {
            cluster,
            endpoints: &endpoints.set,
            now_ms: &now_ms,
            policy: POLICY,
        };
        let mut answer = match self.client.send(&target, &head, &body, None).await {
            Ok(answer) => answer,
            Err(failed) => {
                if let Some(i) = failed.endpoint {
                    self.health
                        .record(&endpoints, i, Some(result_of(failed.failure)));
                }
                return None;
            }
        };
        let used = answer.endpoint();
        let status = answer.head().status.as_u16();
        let mut read = BytesMut::new();
        let mut result = None;
        loop {
            match answer.read().await {
                Ok(Some(chunk)) if read.len() + chunk.len() <= EMBEDDING_LIMIT => {
                    read.extend_from_slice(&chunk);
                }
                Ok(Some(_)) => break,
                Ok(None) => {
                    answer.finish().await;
                    result = Some((status, read.freeze()));
                    break;
                }
                Err(failure) => {
                    self.health
                        .record(&endpoints, used, Some(result_of(failure)));
                    return None;
                }
            }
        }
        self.health.record(&endpoints, used, None);
        result
    }

    /// When a copy failed and every endpoint of the shadow cluster is now
    /// down, closes the route's gate until the first of them is due back.
    fn close_gate_if_all_down(&self, job: &Arc<Job>) {
        let Some(back_in) = self.health.all_down_for(&job.policy.shadow.config) else {
            return;
        };
        if job.policy.gate.close(MirrorResult::ShadowDown) {
            let policy = job.policy.clone();
            // A timer that only reopens the gate: it holds nothing and ends by
            // itself within `back_in`, or with the sender's runtime.
            #[allow(clippy::disallowed_methods)]
            tokio::spawn(async move {
                tokio::time::sleep(back_in).await;
                policy.gate.open(MirrorResult::ShadowDown);
            });
        }
    }

    #[cfg(test)]
    pub(super) fn health(&self) -> &Health {
        &self.health
    }
}

/// What a failed exchange counts as.
pub(super) fn result_of(failure: Failure) -> MirrorResult {
    match failure {
        Failure::ConnectError => MirrorResult::ConnectError,
        Failure::ConnectTimeout => MirrorResult::ConnectTimeout,
        Failure::UpstreamTimeout => MirrorResult::Timeout,
        Failure::UpstreamError
        | Failure::NoRoute
        | Failure::NoCluster
        | Failure::BadRequest
        | Failure::Internal
        | Failure::NeedsHttp2
        | Failure::BodyTooLarge
        | Failure::UriTooLong => MirrorResult::Error,
        // The shadow cluster's own limit: no endpoint of it is to blame.
        Failure::Overflow => MirrorResult::Overflow,
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
    sluice_filters::with_model(&body, model).map_or(body, Bytes::from)
}

/// Shadow copy `n`'s body with its prompt perturbed, when the policy says
/// so and the body has user text to perturb.
fn perturbed_body(job: &Job, body: &Bytes, n: u32) -> Option<Bytes> {
    let policy = job.policy.config.perturb.as_ref()?;
    policy.apply(body, n).map(Bytes::from)
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
