//! Fake upstreams: hyper servers on 127.0.0.1:0 that say who they are and what they got.
//!
//! Every request is answered `200` (or [`UpstreamOptions::status`]) with the header
//! `x-upstream: <name>` and a JSON body
//! `{"upstream", "method", "path", "query", "version", "body_len", "body_sha256", "headers"}`,
//! after reading the whole request body. HTTP/1.1 and h2 are both served: h2c by prior
//! knowledge on the plain server, h2 by ALPN on the TLS one.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;

use super::tls::TlsFixture;

/// How a fake upstream behaves.
#[derive(Clone, Debug)]
pub struct UpstreamOptions {
    /// Wait this long after reading the request body, before the response head.
    pub delay: Duration,
    /// Status of every (non-SSE) response.
    pub status: StatusCode,
    /// When set, `GET|POST /sse` streams events instead of the JSON echo.
    pub sse: Option<SseOptions>,
}

/// `/sse` answers `text/event-stream` with `events` events `data: {"i":n}\n\n`
/// (n = 0, 1, ...), each its own body frame: the first at once, the rest `gap` apart.
#[derive(Clone, Copy, Debug)]
pub struct SseOptions {
    pub events: usize,
    pub gap: Duration,
}

impl Default for UpstreamOptions {
    fn default() -> Self {
        Self {
            delay: Duration::ZERO,
            status: StatusCode::OK,
            sse: None,
        }
    }
}

impl UpstreamOptions {
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    pub fn with_sse(mut self, events: usize, gap: Duration) -> Self {
        self.sse = Some(SseOptions { events, gap });
        self
    }
}

/// A plain-TCP fake upstream (HTTP/1.1 and h2c). Stops on drop.
pub struct NamedUpstream {
    name: String,
    addr: SocketAddr,
    /// `http` or `https`.
    scheme: &'static str,
    requests: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl NamedUpstream {
    /// Starts with default options: immediate 200 JSON echo.
    pub async fn start(name: &str) -> anyhow::Result<Self> {
        Self::start_with(name, UpstreamOptions::default()).await
    }

    pub async fn start_with(name: &str, options: UpstreamOptions) -> anyhow::Result<Self> {
        Self::spawn(name, options, None).await
    }

    /// The same upstream behind TLS (certificate from a [`TlsFixture`]; ALPN h2, http/1.1).
    pub async fn start_tls(name: &str, tls: &TlsFixture) -> anyhow::Result<Self> {
        let acceptor = TlsAcceptor::from(Arc::new(tls.server_config()?));
        Self::spawn(name, UpstreamOptions::default(), Some(acceptor)).await
    }

    async fn spawn(
        name: &str,
        options: UpstreamOptions,
        tls: Option<TlsAcceptor>,
    ) -> anyhow::Result<Self> {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let (addr, requests, task) = spawn_server(name, options, tls).await?;
        Ok(Self {
            name: name.to_owned(),
            addr,
            scheme,
            requests,
            task,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, or `https://` (the certificate also names `localhost`).
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    /// Requests received so far (counted when the request head arrives).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for NamedUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct State {
    name: String,
    options: UpstreamOptions,
    requests: Arc<AtomicU64>,
}

async fn spawn_server(
    name: &str,
    options: UpstreamOptions,
    tls: Option<TlsAcceptor>,
) -> anyhow::Result<(SocketAddr, Arc<AtomicU64>, JoinHandle<()>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let requests = Arc::new(AtomicU64::new(0));
    let state = Arc::new(State {
        name: name.to_owned(),
        options,
        requests: requests.clone(),
    });
    let task = tokio::spawn(accept_loop(listener, tls, state));
    Ok((addr, requests, task))
}

/// Owns every connection task in a JoinSet, so aborting this task ends them all.
async fn accept_loop(listener: TcpListener, tls: Option<TlsAcceptor>, state: Arc<State>) {
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // e.g. out of file descriptors: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        let tls = tls.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(state.clone(), req));
            let builder = auto::Builder::new(TokioExecutor::new());
            match tls {
                None => {
                    let _ = builder
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                }
                Some(acceptor) => {
                    if let Ok(stream) = acceptor.accept(stream).await {
                        let _ = builder
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    }
                }
            }
        });
    }
}

async fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<UpstreamBody>, Infallible> {
    state.requests.fetch_add(1, Ordering::Relaxed);
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(err) => {
            let msg = format!("reading request body: {err}");
            return Ok(respond(
                &state.name,
                StatusCode::BAD_REQUEST,
                "text/plain",
                UpstreamBody::full(msg),
            ));
        }
    };
    if !state.options.delay.is_zero() {
        tokio::time::sleep(state.options.delay).await;
    }
    if let (Some(sse), "/sse") = (state.options.sse, parts.uri.path()) {
        let body = UpstreamBody::Sse(SseBody {
            next: 0,
            options: sse,
            sleep: None,
        });
        return Ok(respond(
            &state.name,
            StatusCode::OK,
            "text/event-stream",
            body,
        ));
    }
    let mut headers = BTreeMap::<String, String>::new();
    for (name, value) in &parts.headers {
        let value = String::from_utf8_lossy(value.as_bytes());
        headers
            .entry(name.as_str().to_owned())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert_with(|| value.into_owned());
    }
    let echo = serde_json::json!({
        "upstream": state.name,
        "method": parts.method.as_str(),
        "path": parts.uri.path(),
        "query": parts.uri.query(),
        "version": format!("{:?}", parts.version),
        "body_len": body.len(),
        "body_sha256": sha256_hex(&body),
        "headers": headers,
    });
    let body = UpstreamBody::full(echo.to_string());
    Ok(respond(
        &state.name,
        state.options.status,
        "application/json",
        body,
    ))
}

fn respond(
    name: &str,
    status: StatusCode,
    content_type: &str,
    body: UpstreamBody,
) -> Response<UpstreamBody> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    if let Ok(v) = content_type.parse() {
        headers.insert(http::header::CONTENT_TYPE, v);
    }
    if let Ok(v) = name.parse() {
        headers.insert("x-upstream", v);
    }
    response
}

/// Lower-case hex SHA-256, the format of the echo's `body_sha256`.
pub fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A whole body (exact size, so HTTP/1.1 gets a content-length) or the paced SSE stream.
enum UpstreamBody {
    Full(Option<Bytes>),
    Sse(SseBody),
}

impl UpstreamBody {
    fn full(data: impl Into<Bytes>) -> Self {
        Self::Full(Some(data.into()))
    }
}

/// Paced on its own timer so each event leaves as its own frame (a chunk in HTTP/1.1).
struct SseBody {
    next: usize,
    options: SseOptions,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Self::Full(data) => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
            Self::Sse(sse) => {
                if sse.next >= sse.options.events {
                    return Poll::Ready(None);
                }
                if let Some(sleep) = sse.sleep.as_mut() {
                    ready!(sleep.as_mut().poll(cx));
                }
                let event = format!("data: {{\"i\":{}}}\n\n", sse.next);
                sse.next += 1;
                sse.sleep = Some(Box::pin(tokio::time::sleep(sse.options.gap)));
                Poll::Ready(Some(Ok(Frame::data(Bytes::from(event)))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Full(data) => data.is_none(),
            Self::Sse(sse) => sse.next >= sse.options.events,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Full(Some(data)) => SizeHint::with_exact(data.len() as u64),
            Self::Full(None) => SizeHint::with_exact(0),
            Self::Sse(_) => SizeHint::default(),
        }
    }
}
