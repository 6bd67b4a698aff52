//! What the request path hands the sender: the request as the client sent
//! it (body as refcounted chunks) and what the primary answered.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use sluice_control::{ClusterRuntime, MirrorRuntime};

pub(crate) struct Job {
    pub policy: Arc<MirrorRuntime>,
    /// Copies to the shadow cluster, numbered 1..=shadow_copies.
    pub shadow_copies: u32,
    /// The cluster the primary went to, for `compare.noise_copies`.
    pub primary_cluster: Option<Arc<ClusterRuntime>>,
    pub request_id: String,
    pub method: http::Method,
    /// Path and query.
    pub path: String,
    pub headers: http::HeaderMap,
    /// The URI's authority (an HTTP/2 client's, which sends no `Host`).
    pub authority: Option<String>,
    pub body: Vec<Bytes>,
    pub primary: Answer,
    /// Sampled for coverage (`compare.embeddings.coverage`): the route's
    /// rollout step when the request arrived.
    pub coverage_step: Option<usize>,
}

/// One answer, the primary's or a copy's, as far as the comparison needs it.
#[derive(Default)]
pub(crate) struct Answer {
    /// 0 when no answer reached the client.
    pub status: u16,
    pub latency: Duration,
    pub ttft: Option<Duration>,
    pub output_tokens: Option<u64>,
    /// The answer body up to the comparison limit.
    pub body: Vec<Bytes>,
    pub bytes: usize,
    /// The body was longer than the limit: its text and ids are not compared.
    pub truncated: bool,
    /// A gRPC call's `grpc-status`.
    pub grpc_status: Option<u32>,
}

impl Job {
    pub(crate) fn body_len(&self) -> usize {
        self.body.iter().map(Bytes::len).sum()
    }
}
