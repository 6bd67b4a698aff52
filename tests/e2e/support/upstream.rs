//! The echo upstream: a hyper server on 127.0.0.1:0 that says who it is and what it got,
//! for the tests of what the proxy passes on (methods, paths, bodies, headers, protocol
//! versions, TLS to a cluster) and of which cluster answered.
//!
//! Every request is answered `200` with the header `x-upstream: <name>` and a JSON body
//! `{"upstream", "method", "path", "query", "version", "body_len", "body_sha256", "headers"}`,
//! after reading the whole request body. HTTP/1.1 and h2 are both served: h2c by prior
//! knowledge on the plain server, h2 by ALPN on the TLS one. It is not an LLM: tests that need
//! model answers, pacing, delays or a record of requests use `sluice_cli::MockLlm`.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;

use super::tls::TlsFixture;

/// A plain-TCP fake upstream (HTTP/1.1 and h2c). Stops on drop.
pub(crate) struct NamedUpstream {
    name: String,
    addr: SocketAddr,
    /// `http` or `https`.
    scheme: &'static str,
    requests: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl NamedUpstream {
    pub(crate) async fn start(name: &str) -> anyhow::Result<Self> {
        Self::spawn(name, None, StatusCode::OK).await
    }

    /// The same upstream answering every request with `status` (its echo as the body).
    pub(crate) async fn start_answering(name: &str, status: u16) -> anyhow::Result<Self> {
        Self::spawn(name, None, StatusCode::from_u16(status)?).await
    }

    /// The same upstream behind TLS (certificate from a [`TlsFixture`]; ALPN h2, http/1.1).
    pub(crate) async fn start_tls(name: &str, tls: &TlsFixture) -> anyhow::Result<Self> {
        let acceptor = TlsAcceptor::from(Arc::new(tls.server_config()?));
        Self::spawn(name, Some(acceptor), StatusCode::OK).await
    }

    async fn spawn(
        name: &str,
        tls: Option<TlsAcceptor>,
        status: StatusCode,
    ) -> anyhow::Result<Self> {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let (addr, requests, task) = spawn_server(name, tls, status).await?;
        Ok(Self {
            name: name.to_owned(),
            addr,
            scheme,
            requests,
            task,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, or `https://` (the certificate also names `localhost`).
    pub(crate) fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    /// Requests received so far (counted when the request head arrives).
    pub(crate) fn requests(&self) -> u64 {
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
    requests: Arc<AtomicU64>,
    /// What every answer's status is.
    status: StatusCode,
}

async fn spawn_server(
    name: &str,
    tls: Option<TlsAcceptor>,
    status: StatusCode,
) -> anyhow::Result<(SocketAddr, Arc<AtomicU64>, JoinHandle<()>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let requests = Arc::new(AtomicU64::new(0));
    let state = Arc::new(State {
        name: name.to_owned(),
        requests: requests.clone(),
        status,
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
) -> Result<Response<Full<Bytes>>, Infallible> {
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
                msg,
            ));
        }
    };
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
    Ok(respond(
        &state.name,
        state.status,
        "application/json",
        echo.to_string(),
    ))
}

/// A whole body: `Full` has an exact size, so HTTP/1.1 gets a content-length.
fn respond(
    name: &str,
    status: StatusCode,
    content_type: &str,
    body: String,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
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
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
