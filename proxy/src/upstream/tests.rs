//! The client against raw loopback servers that misbehave on purpose: a
//! pooled connection the server drops after reading the next request, a
//! refused endpoint, a fresh connection that breaks; and the cluster's
//! `max_connections`, kept by the connector and the streams' drop.
// Tests may spawn bare tasks (each test's runtime ends with it) and read std time.
#![allow(clippy::disallowed_methods)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::telemetry::Tracer;

const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
const OK_CLOSE: &[u8] = b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok";

/// What the server does with each request, by the order requests arrive.
#[derive(Clone, Copy)]
enum Then {
    Answer,
    /// Reads the request and closes the connection unanswered.
    Drop,
    /// Answers `connection: close`, and closes.
    Close,
}

/// A server whose `n`th request overall gets `script[n]` (then `Answer`).
/// Returns its address and the count of connections it accepted.
async fn server(script: &'static [Then]) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve(conn, script, requests.clone()));
        }
    });
    (addr, accepted)
}

async fn serve(mut conn: TcpStream, script: &'static [Then], requests: Arc<AtomicUsize>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.clear();
        let n = requests.fetch_add(1, Ordering::SeqCst);
        match script.get(n).copied().unwrap_or(Then::Answer) {
            Then::Answer => conn.write_all(OK).await.unwrap(),
            Then::Drop => return,
            Then::Close => {
                let _ = conn.write_all(OK_CLOSE).await;
                return;
            }
        }
    }
}

fn dead_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// A config of one cluster `up` on `endpoints`, with `extra` keys.
fn config(endpoints: &[SocketAddr], extra: &str) -> Config {
    let list: Vec<String> = endpoints.iter().map(ToString::to_string).collect();
    let yaml = format!(
        "listeners:\n  - {{ name: public, listen: 127.0.0.1:18080, protocol: http }}\n\
clusters:\n  - {{ name: up, kind: llm, endpoints: [{}]{extra} }}\n\
routes:\n  - {{ name: r, listener: public, split: {{ up: 100 }} }}\n",
        list.join(", ")
    );
    Config::from_yaml(&yaml).unwrap()
}

struct Fixture {
    cluster: ClusterRuntime,
    endpoints: EndpointSet,
    client: Arc<UpstreamClient>,
    metrics: Arc<Metrics>,
    started: Instant,
}

impl Fixture {
    fn new(endpoints: &[SocketAddr]) -> Fixture {
        Fixture::with(endpoints, "")
    }

    fn with(endpoints: &[SocketAddr], extra: &str) -> Fixture {
        let config = config(endpoints, extra);
        let metrics = Arc::new(Metrics::new().unwrap());
        let cluster = config.clusters[0].clone();
        Fixture {
            endpoints: EndpointSet::new(endpoints.len()),
            client: UpstreamClient::new(&config, metrics.clone()).unwrap(),
            cluster: ClusterRuntime {
                lineage_id: sluice_control::cluster_id(&cluster),
                config: cluster,
                endpoints: Arc::new(EndpointSet::new(endpoints.len())),
                breakers: Arc::default(),
                data_plane: std::sync::OnceLock::new(),
            },
            metrics,
            started: Instant::now(),
        }
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Connections the cluster's breaker counts open.
    fn open(&self) -> usize {
        self.cluster
            .breakers
            .taken(sluice_filters::Breaker::Connections)
    }

    async fn get(&self, traced: Option<Traced<'_>>) -> Result<Answer, Failed> {
        self.get_on(&self.cluster, traced).await
    }

    /// A cluster like the fixture's, named `name`.
    fn twin(&self, name: &str) -> ClusterRuntime {
        let mut config = self.cluster.config.clone();
        config.name = name.to_string();
        ClusterRuntime {
            lineage_id: sluice_control::cluster_id(&config),
            config,
            endpoints: Arc::new(EndpointSet::new(self.endpoints.len())),
            breakers: Arc::default(),
            data_plane: std::sync::OnceLock::new(),
        }
    }

    async fn get_on(
        &self,
        cluster: &ClusterRuntime,
        traced: Option<Traced<'_>>,
    ) -> Result<Answer, Failed> {
        let now = || self.started.elapsed().as_millis() as u64;
        let target = Target {
            cluster,
            endpoints: &self.endpoints,
            now_ms: &now,
            policy: Policy::PROXY,
        };
        let head = request_head(
            &http::Method::POST,
            "/v1/chat/completions",
            &http::HeaderMap::new(),
            Some("up"),
            2,
        )
        .unwrap();
        self.client
            .send(&target, &head, &Bytes::from_static(b"{}"), traced)
            .await
    }
}

async fn body_of(mut answer: Answer) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(chunk) = answer.read().await.unwrap() {
        body.extend_from_slice(&chunk);
    }
    answer.finish().await;
    body
}

#[tokio::test]
async fn a_pooled_connection_dropped_before_the_answer_is_retried_on_a_fresh_one() {
    let (addr, accepted) = server(&[Then::Answer, Then::Drop]).await;
    let f = Fixture::new(&[addr]);
    let first = f.get(None).await.unwrap();
    assert!(!first.reused());
    assert_eq!(body_of(first).await, b"ok");
    let second = f.get(None).await.unwrap();
    assert_eq!(second.head().status, 200);
    assert!(!second.reused(), "answered on the fresh connection");
    assert_eq!(body_of(second).await, b"ok");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_fresh_connection_that_breaks_is_not_sent_again() {
    let (addr, accepted) = server(&[Then::Drop]).await;
    let f = Fixture::new(&[addr]);
    let failed = f.get(None).await.err().unwrap();
    assert_eq!(failed.failure, Failure::UpstreamError);
    assert_eq!(failed.endpoint, Some(0));
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_refusing_endpoint_is_ejected_and_the_next_one_answers_with_two_spans() {
    let (addr, _) = server(&[]).await;
    let f = Fixture::new(&[dead_addr(), addr]);
    let mut trace = Tracer::disabled().begin(None, None);
    let mut attempts = Vec::new();
    let traced = Traced {
        trace: &mut trace,
        attempts: &mut attempts,
    };
    let answer = f.get(Some(traced)).await.unwrap();
    assert_eq!(answer.endpoint(), 1);
    assert_eq!(body_of(answer).await, b"ok");
    assert!(f
        .endpoints
        .is_ejected(0, f.started.elapsed().as_millis() as u64));
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0].error.as_deref(), Some("ConnectRefused"));
    assert_eq!(attempts[1].error, None);
    assert_ne!(attempts[0].span_id, attempts[1].span_id);

    // Every endpoint refusing: a connect error naming the last one tried.
    let f = Fixture::new(&[dead_addr(), dead_addr()]);
    let failed = f.get(None).await.err().unwrap();
    assert_eq!(failed.failure, Failure::ConnectError);
    assert!(failed.endpoint.is_some());
}

#[test]
fn the_head_drops_hop_by_hop_headers_and_sets_the_length() {
    let mut headers = http::HeaderMap::new();
    headers.insert("connection", "keep-alive".parse().unwrap());
    headers.insert("transfer-encoding", "chunked".parse().unwrap());
    headers.insert("x-kept", "1".parse().unwrap());
    let head = request_head(&http::Method::POST, "/p?q=1", &headers, Some("h:1"), 5).unwrap();
    assert_eq!(head.uri, "/p?q=1");
    assert!(head.headers.get("connection").is_none());
    assert!(head.headers.get("transfer-encoding").is_none());
    assert_eq!(head.headers["x-kept"], "1");
    assert_eq!(head.headers["host"], "h:1");
    assert_eq!(head.headers["content-length"], "5");
    headers.insert("te", "trailers".parse().unwrap());
    let grpc = request_head(&http::Method::POST, "/s/M", &headers, None, 5).unwrap();
    assert_eq!(grpc.headers["te"], "trailers");
    headers.insert("te", "gzip".parse().unwrap());
    let other = request_head(&http::Method::POST, "/", &headers, None, 5).unwrap();
    assert!(other.headers.get("te").is_none());
    let get = request_head(&http::Method::GET, "/", &headers, None, 0).unwrap();
    assert!(get.headers.get("content-length").is_none());
}

#[test]
fn tried_marks_the_first_64_endpoints() {
    let mut tried = Tried::default();
    tried.mark(1);
    tried.mark(70);
    assert_eq!(tried.bits(), 0b10);
    assert!(tried.any_left(2));
    tried.mark(0);
    assert!(!tried.any_left(2));
    assert!(tried.any_left(65), "beyond 64 nothing is remembered");
}

/// Polls `ready` for up to 5 s.
async fn eventually(ready: impl Fn() -> bool) -> bool {
    for _ in 0..500 {
        if ready() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    ready()
}

#[tokio::test]
async fn past_max_connections_a_request_fails_overflow_without_connecting_or_ejecting() {
    let (addr, accepted) = server(&[]).await;
    let f = Fixture::with(&[addr], ", circuit_breakers: { max_connections: 1 }");
    // The one connection, busy while its answer is unread.
    let held = f.get(None).await.unwrap();
    assert_eq!(f.open(), 1);
    let failed = f.get(None).await.err().unwrap();
    assert_eq!(failed.failure, Failure::Overflow);
    assert_eq!(failed.endpoint, Some(0));
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "no second connection");
    assert!(
        !f.endpoints.is_ejected(0, f.now()),
        "the endpoint is not to blame"
    );
    let counted = f
        .metrics
        .breaker_overflow
        .with_label_values(&["up", "max_connections"])
        .get();
    assert_eq!(counted, 1);
    // Back in the pool, the connection serves the next request.
    assert_eq!(body_of(held).await, b"ok");
    let again = f.get(None).await.unwrap();
    assert!(again.reused());
    assert_eq!(body_of(again).await, b"ok");
    assert_eq!((accepted.load(Ordering::SeqCst), f.open()), (1, 1));
}

#[tokio::test]
async fn connections_closed_by_the_server_give_their_places_back() {
    let (addr, accepted) = server(&[Then::Close; 20]).await;
    let f = Fixture::with(&[addr], ", circuit_breakers: { max_connections: 1 }");
    for n in 0..20 {
        let answer = f
            .get(None)
            .await
            .unwrap_or_else(|e| panic!("request {n}: {e:?}"));
        assert_eq!(body_of(answer).await, b"ok");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 20, "a new connection each");
    assert!(
        eventually(|| f.open() == 0).await,
        "{} still open",
        f.open()
    );
    // A refused connect gives its place back too.
    let f = Fixture::with(&[dead_addr()], ", circuit_breakers: { max_connections: 1 }");
    assert_eq!(
        f.get(None).await.err().unwrap().failure,
        Failure::ConnectError
    );
    assert_eq!(f.open(), 0);
}

#[tokio::test]
async fn two_clusters_on_one_address_keep_their_connections_apart() {
    let (addr, accepted) = server(&[]).await;
    let f = Fixture::with(&[addr], ", circuit_breakers: { max_connections: 1 }");
    let twin = f.twin("twin");
    assert_eq!(body_of(f.get(None).await.unwrap()).await, b"ok");
    // The idle pooled connection is the first cluster's: the twin opens its own.
    let answer = f.get_on(&twin, None).await.unwrap();
    assert!(!answer.reused());
    assert_eq!(body_of(answer).await, b"ok");
    let again = f.get(None).await.unwrap();
    assert!(again.reused());
    assert_eq!(body_of(again).await, b"ok");
    let twin_open = twin.breakers.taken(sluice_filters::Breaker::Connections);
    assert_eq!(
        (accepted.load(Ordering::SeqCst), f.open(), twin_open),
        (2, 1, 1)
    );
}

/// An HTTP/2-only (h2c) server answering `ok` then the trailer
/// `grpc-status: 0`; returns its address and the connections it accepted.
async fn h2c_server() -> (SocketAddr, Arc<AtomicUsize>) {
    use http_body_util::StreamBody;
    use hyper::body::Frame;

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let service = hyper::service::service_fn(|_req| async {
                let mut trailers = http::HeaderMap::new();
                trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = vec![
                    Ok(Frame::data(Bytes::from_static(b"ok"))),
                    Ok(Frame::trailers(trailers)),
                ];
                let body = StreamBody::new(futures_util::stream::iter(frames));
                Ok::<_, std::convert::Infallible>(hyper::Response::new(body))
            });
            tokio::spawn(
                hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(conn), service),
            );
        }
    });
    (addr, accepted)
}

#[tokio::test]
async fn an_h2c_cluster_gets_http2_streams_on_one_connection_and_its_trailers_come_back() {
    let (addr, accepted) = h2c_server().await;
    let f = Fixture::with(&[addr], ", protocol: h2c");
    let first = f.get(None).await.unwrap();
    assert!(!first.reused());
    // A second call while the first is open shares its connection.
    let mut second = f.get(None).await.unwrap();
    assert!(second.reused(), "a stream on the open connection");
    assert_eq!(body_of(first).await, b"ok");
    assert_eq!(second.read().await.unwrap().as_deref(), Some(&b"ok"[..]));
    assert_eq!(second.read().await.unwrap(), None);
    assert_eq!(second.trailers().unwrap()["grpc-status"], "0");
    second.finish().await;
    // Back in the pool, the connection serves the next call.
    let third = f.get(None).await.unwrap();
    assert!(third.reused());
    assert_eq!(body_of(third).await, b"ok");
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}
