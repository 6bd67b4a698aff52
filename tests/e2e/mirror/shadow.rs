//! A shadow cluster for the mirror tests: a hyper server on 127.0.0.1:0
//! that records every request it reads (the shadow marker, the trace
//! context, the session, the body's hash and `model`), and answers at once,
//! after a delay, or by resetting the connection.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::support::sha256_hex;

#[derive(Clone, Copy, Debug)]
pub enum Behaviour {
    Answer,
    /// Answers after this long.
    Slow(Duration),
    /// Closes every connection with a reset as soon as it is accepted.
    Reset,
}

/// What one received copy carried.
#[derive(Clone, Debug)]
pub struct Seen {
    pub shadow: Option<String>,
    pub traceparent: Option<String>,
    pub request_id: Option<String>,
    pub session: Option<String>,
    pub env: Option<String>,
    pub body_len: usize,
    pub body_sha256: String,
    pub model: Option<String>,
}

pub struct Shadow {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: JoinHandle<()>,
}

impl Shadow {
    pub async fn start(behaviour: Behaviour) -> Shadow {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                if let Behaviour::Reset = behaviour {
                    let _ = stream.set_zero_linger();
                    drop(stream);
                    continue;
                }
                let record = record.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let record = record.clone();
                        async move { answer(req, behaviour, record).await }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Shadow { addr, seen, task }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// Waits until `n` copies arrived (30 s at most), and a little longer
    /// for any copy too many to show up.
    pub async fn wait_for(&self, n: usize) -> Vec<Seen> {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while self.count() < n && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        self.seen()
    }
}

impl Drop for Shadow {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(
    req: Request<Incoming>,
    behaviour: Behaviour,
    record: Arc<Mutex<Vec<Seen>>>,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let mut seen = Seen {
        shadow: header("x-sluice-shadow"),
        traceparent: header("traceparent"),
        request_id: header("x-request-id"),
        session: header("x-session-id"),
        env: header("x-env"),
        body_len: 0,
        body_sha256: String::new(),
        model: None,
    };
    let body = req.into_body().collect().await?.to_bytes();
    seen.body_len = body.len();
    seen.body_sha256 = sha256_hex(&body);
    seen.model = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("model")?.as_str().map(str::to_string));
    record.lock().unwrap().push(seen);
    if let Behaviour::Slow(delay) = behaviour {
        tokio::time::sleep(delay).await;
    }
    Ok(Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(br#"{"shadow":true}"#)))
        .unwrap())
}
