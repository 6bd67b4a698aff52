//! The load client: one HTTP/1.1 request of a step over a keep-alive pool
//! (http, or https through rustls with ring: Mozilla's roots, or a
//! scenario's `target.ca_file` alone), timed on the run's monotonic clock, its body fed chunk by chunk to the
//! same token meter as the proxy's (so client and proxy agree on TTFT,
//! gaps and token counts by construction).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};
use sluice_filters::{
    Dialect, TokenMeter, TraceContext, KVCACHE_RATIO_HEADER, SERVED_CLUSTER_HEADER,
    SERVED_LINEAGE_HEADER, SERVED_VERSION_HEADER,
};

mod context;
mod grpc;
mod pool;
mod resp;

pub use context::model_context;
pub(crate) use grpc::Grpc;
pub use grpc::GrpcReply;
pub use resp::Cache;
pub(crate) use resp::Redis;
pub use sluice_filters::LOAD_HEADER;

/// Body chunks read per response at most: every loop is bounded.
const MAX_CHUNKS: usize = 1 << 20;

/// Why a request has no good answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// 429: counted apart from the other errors.
    RateLimited,
    /// Any other status outside 2xx.
    Status,
    /// The step's timeout passed.
    Timeout,
    /// Connect refused, reset, a broken body.
    Transport,
}

impl Failure {
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::RateLimited => "rate_limited",
            Failure::Status => "status",
            Failure::Timeout => "timeout",
            Failure::Transport => "transport",
        }
    }
}

/// What one request did. Every time is µs from the run's start, on one
/// monotonic clock; `intended` comes from the schedule. Written as is by
/// `--detailed`.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Outcome {
    pub step: usize,
    /// The W3C trace id this request's `traceparent` carried, 32 hex digits
    /// (empty for steps sent without one): the proxy records the same id as
    /// its trace line's `trace_id`, so a client row joins the proxy's.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub trace_id: String,
    /// The journey's arrival index in the whole schedule.
    pub index: u64,
    pub stage: usize,
    pub warmup: bool,
    /// It waited for a `max_in_flight` slot.
    pub queued: bool,
    pub intended_us: u64,
    pub sent_us: u64,
    pub first_byte_us: Option<u64>,
    pub first_content_us: Option<u64>,
    pub end_us: u64,
    /// Between content-carrying chunks, µs.
    pub gaps_us: Vec<u64>,
    pub status: Option<u16>,
    pub failure: Option<Failure>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub output_tokens_estimated: bool,
    /// A redis step's hit (a reply) or miss (nil).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<Cache>,
    /// What served it: the cluster and its version, from a sluice proxy's
    /// answer headers (which it sends to trusted load peers only), and the
    /// model the answer names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The lineage id of that cluster version (`x-sluice-lineage`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lineage_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// A grpc step's answer: its grpc-status, messages and their bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcReply>,
    /// The KV-cache usage (0..1) of the model server endpoint that served
    /// it, as a sluice proxy's upstream scrape last read it (its
    /// `x-sluice-kvcache-ratio` answer header, sent to trusted load peers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kvcache_ratio: Option<f64>,
    /// The answer's `finish_reason` (`stop`, `length`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Cut by the model's context: `finish_reason: length` before the
    /// request's `max_tokens`, or an error answer whose body says the
    /// prompt is past the context (see [`mentions_context_limit`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

impl Outcome {
    /// The response time: end − intended.
    pub fn e2el_us(&self) -> u64 {
        self.end_us.saturating_sub(self.intended_us)
    }

    /// TTFT from the intended start, when content came.
    pub fn ttft_us(&self) -> Option<u64> {
        self.first_content_us
            .map(|f| f.saturating_sub(self.intended_us))
    }

    /// Time per output token after the first, when there were two or more.
    pub fn tpot_us(&self) -> Option<u64> {
        match (self.first_content_us, self.output_tokens) {
            (Some(f), Some(n)) if n > 1 => Some(self.end_us.saturating_sub(f) / (n - 1)),
            _ => None,
        }
    }
}

/// A request ready to send.
pub(crate) struct Call {
    pub(crate) method: Method,
    pub(crate) uri: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Option<Vec<u8>>,
    pub(crate) path: String,
    pub(crate) timeout: Duration,
    /// Keep the answer's body (at most [`MAX_KEPT`]) for `extract`.
    pub(crate) keep_body: bool,
}

/// The most of an answer kept for `extract` and `{{NAME.text}}`.
pub(crate) const MAX_KEPT: usize = 1 << 20;
/// The most of an error answer read for [`mentions_context_limit`].
const ERROR_HEAD: usize = 4096;

/// Whether an error answer's body says the prompt did not fit the model's
/// context: llama.cpp's `the request exceeds the available context size`
/// (`exceed_context_size_error`), vLLM's and OpenAI's `maximum context
/// length`, TGI's `must have less than N tokens` / `too long`.
pub fn mentions_context_limit(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&body[..body.len().min(ERROR_HEAD)]).to_lowercase();
    ["context", "too long", "exceeds"]
        .iter()
        .any(|w| text.contains(w))
}

/// The keep-alive pool and the run's id.
pub(crate) struct Client {
    pool: Arc<pool::Pool>,
    run_id: HeaderValue,
}

/// The certificates (DER) of a PEM file: every `CERTIFICATE` section,
/// each one a certificate rustls can trust; none is an error.
pub(crate) fn read_ca_file(path: &Path) -> Result<Vec<Vec<u8>>, String> {
    let text = std::fs::read(path).map_err(|e| e.to_string())?;
    let mut certs = Vec::new();
    for cert in CertificateDer::pem_slice_iter(&text) {
        let cert = cert.map_err(|e| format!("not PEM certificates: {e}"))?;
        let mut store = RootCertStore::empty();
        store
            .add(cert.clone())
            .map_err(|e| format!("certificate {} is not usable: {e}", certs.len() + 1))?;
        certs.push(cert.to_vec());
    }
    if certs.is_empty() {
        return Err("no PEM certificate (`-----BEGIN CERTIFICATE-----`) in it".to_owned());
    }
    Ok(certs)
}

/// A connector for http and https URLs: HTTP/1.1 (no ALPN offered), rustls
/// with ring, trusting `ca_certs` (DER) alone, or Mozilla's roots when empty.
pub fn connector(ca_certs: &[Vec<u8>]) -> Result<HttpsConnector<HttpConnector>, String> {
    Ok(HttpsConnectorBuilder::new()
        .with_tls_config(tls_config(ca_certs)?)
        .https_or_http()
        .enable_http1()
        .wrap_connector(tcp()))
}

/// The same connector for HTTP/2 alone (grpc steps): cleartext with prior
/// knowledge (h2c) for http URLs, TLS offering ALPN `h2` for https ones.
pub(crate) fn h2_connector(ca_certs: &[Vec<u8>]) -> Result<HttpsConnector<HttpConnector>, String> {
    Ok(HttpsConnectorBuilder::new()
        .with_tls_config(tls_config(ca_certs)?)
        .https_or_http()
        .enable_http2()
        .wrap_connector(tcp()))
}

/// rustls with ring, trusting `ca_certs` (DER) alone, or Mozilla's roots when empty.
fn tls_config(ca_certs: &[Vec<u8>]) -> Result<ClientConfig, String> {
    let mut roots = RootCertStore::empty();
    if ca_certs.is_empty() {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    for der in ca_certs {
        roots
            .add(CertificateDer::from(der.clone()))
            .map_err(|e| format!("target.ca_file: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

fn tcp() -> HttpConnector {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    // The TLS layer takes https URLs; the TCP one must let them through.
    http.enforce_http(false);
    http
}

impl Client {
    /// `max_connections`: per origin at most (`target.max_connections`);
    /// `None`, one per request in flight.
    pub(crate) fn new(
        run_id: &str,
        ca_certs: &[Vec<u8>],
        max_connections: Option<usize>,
    ) -> Result<Client, String> {
        Ok(Client {
            pool: Arc::new(pool::Pool::new(connector(ca_certs)?, max_connections)),
            run_id: HeaderValue::from_str(run_id)
                .unwrap_or_else(|_| HeaderValue::from_static("invalid")),
        })
    }

    /// Sends `call` now and fills `out`'s times, status, tokens and failure;
    /// returns the body when `keep_body` (else empty). `sent` is when the
    /// request had its connection, or the slot to open one: a wait at
    /// `target.max_connections` is the client's queueing and shows in the
    /// dispatch lag; a connect is the target's work, in the service time.
    pub(crate) async fn send(&self, call: Call, start: Instant, out: &mut Outcome) -> Vec<u8> {
        // Until a connection or a slot is in hand (a timeout may come first).
        out.sent_us = since(start, Instant::now());
        let mut kept = Vec::new();
        let result =
            tokio::time::timeout(call.timeout, self.exchange(call, start, out, &mut kept)).await;
        match result {
            Ok(Ok(())) => {}
            Ok(Err(())) => out.failure = Some(Failure::Transport),
            Err(_) => out.failure = Some(Failure::Timeout),
        }
        out.end_us = since(start, Instant::now());
        kept
    }

    async fn exchange(
        &self,
        call: Call,
        start: Instant,
        out: &mut Outcome,
        kept: &mut Vec<u8>,
    ) -> Result<(), ()> {
        let uri: http::Uri = call.uri.parse().map_err(|_| ())?;
        let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
            return Err(());
        };
        let origin = [scheme, "://", authority.as_str()].concat();
        // HTTP/1.1 wants the origin form on the request line and the
        // authority in `Host`, unless the scenario's headers name one.
        let target = uri.path_and_query().map_or("/", |p| p.as_str());
        let mut builder = Request::builder().method(call.method.clone()).uri(target);
        if !call
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("host"))
        {
            builder = builder.header(http::header::HOST, authority.as_str());
        }
        let mut request = traced(builder, &call, &self.run_id, out);
        let body = match call.body {
            Some(b) => {
                request = request.header(http::header::CONTENT_TYPE, "application/json");
                Full::new(Bytes::from(b))
            }
            None => Full::new(Bytes::new()),
        };
        let request = request.body(body).map_err(|_| ())?;
        let taken = self.pool.take(&origin).await?;
        let sent = Instant::now();
        out.sent_us = since(start, sent);
        let (mut sender, reused) = match taken {
            pool::Taken::Idle(sender) => (sender, true),
            pool::Taken::Dial => (self.pool.dial(&origin, &uri).await?, false),
        };
        let response = match sender.try_send_request(request).await {
            Ok(response) => response,
            // An idle connection the server closed before it took the
            // request: the request was not sent, so it goes once more on a
            // new connection (what a keep-alive client owes its caller).
            Err(mut e) => match (reused, e.take_message()) {
                (true, Some(request)) => {
                    sender = self.pool.connect(&origin, &uri).await?;
                    sender.send_request(request).await.map_err(|_| ())?
                }
                _ => return Err(()),
            },
        };
        let status = response.status().as_u16();
        out.status = Some(status);
        out.failure = match status {
            200..=299 => None,
            429 => Some(Failure::RateLimited),
            _ => Some(Failure::Status),
        };
        let headers = response.headers();
        let served = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        out.cluster = served(SERVED_CLUSTER_HEADER);
        out.version = served(SERVED_VERSION_HEADER);
        out.lineage_id = served(SERVED_LINEAGE_HEADER);
        out.kvcache_ratio = served(KVCACHE_RATIO_HEADER)
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|r| r.is_finite() && (0.0..=1.0).contains(r));
        let failed = out.failure.is_some();
        let mut error_head = Vec::new();
        let content_type = headers
            .get(http::header::CONTENT_TYPE)
            .map(|v| v.as_bytes().to_vec());
        let mut meter = TokenMeter::new(Dialect::detect(&call.path, content_type.as_deref()));
        let mut body = response.into_body();
        let mut last_content: Option<u64> = None;
        let mut ended = false;
        for _ in 0..MAX_CHUNKS {
            let Some(frame) = body.frame().await else {
                ended = true;
                break;
            };
            let frame = frame.map_err(|_| ())?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let now = Instant::now();
            let at_us = since(start, now);
            out.first_byte_us.get_or_insert(at_us);
            if call.keep_body && kept.len() + data.len() <= MAX_KEPT {
                kept.extend_from_slice(&data);
            }
            if failed && error_head.len() < ERROR_HEAD {
                error_head
                    .extend_from_slice(&data[..data.len().min(ERROR_HEAD - error_head.len())]);
            }
            if meter.feed(&data, now.duration_since(sent)) > 0 {
                if let Some(last) = last_content {
                    out.gaps_us.push(at_us.saturating_sub(last));
                }
                out.first_content_us.get_or_insert(at_us);
                last_content = Some(at_us);
            }
        }
        if ended {
            // Read to its end: the connection can carry the next request.
            self.pool.give(&origin, sender);
        }
        let summary = meter.finish(sent.elapsed());
        out.input_tokens = summary.input_tokens;
        out.output_tokens = summary.output_tokens;
        out.output_tokens_estimated = summary.output_tokens_estimated;
        out.model = summary.response_model;
        out.finish_reason = summary.finish_reason;
        out.truncated |= failed && mentions_context_limit(&error_head);
        Ok(())
    }
}

/// µs from `start` to `t` (0 when `t` is earlier).
pub(crate) fn since(start: Instant, t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(start).as_micros()).unwrap_or(u64::MAX)
}

/// The head every client's request carries: the call's headers (those
/// that are valid HTTP), a fresh sampled trace context, whose id goes to
/// the outcome, and the run's id.
pub(crate) fn traced(
    mut request: http::request::Builder,
    call: &Call,
    run_id: &HeaderValue,
    out: &mut Outcome,
) -> http::request::Builder {
    for (name, value) in &call.headers {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            request = request.header(n, v);
        }
    }
    let trace = TraceContext {
        trace_id: rand::random::<[u8; 16]>(),
        span_id: rand::random::<[u8; 8]>(),
        sampled: true,
    };
    out.trace_id = trace.trace_id_hex();
    request
        .header("traceparent", trace.to_traceparent())
        .header(LOAD_HEADER, run_id.clone())
}

#[cfg(test)]
mod tests;
