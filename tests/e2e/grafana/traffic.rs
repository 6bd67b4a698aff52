//! The traffic that gives every row of the dashboard data, each kind on its own task
//! until stopped: streaming chats (the rollout, token timing, the mirror, faults), RESP
//! commands, bursts past a breaker of one request, calls to a cluster with an endpoint
//! that answers 500 (ejections), requests past a rate limit, and gRPC calls.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use sluice_proxy::Sluice;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::harness::listener;

/// No task runs longer than this, whatever the test does.
const LIMIT: Duration = Duration::from_secs(120);

pub(super) struct Traffic {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Traffic {
    pub(super) fn start(sluice: &Sluice) -> Traffic {
        let mut traffic = Traffic {
            stop: Arc::new(AtomicBool::new(false)),
            tasks: Vec::new(),
        };
        let public = listener(sluice, "public");
        let chat = format!("http://{public}/v1/chat/completions");
        let client = reqwest::Client::new();
        let stream = json!({"model": "m1", "messages": [{"role": "user", "content": "hi"}],
            "stream": true});
        for _ in 0..3 {
            let request = client.post(&chat).json(&stream);
            // An error shows as a query without data, and the test says which.
            traffic.repeat(Duration::ZERO, move || send(request.try_clone()));
        }
        let cache = listener(sluice, "cache");
        traffic.repeat(Duration::from_millis(50), move || resp_round(cache));
        // Three at once through `max_requests: 1`: two overflow.
        let guarded = client.post(&chat).header("x-pool", "guarded").json(&stream);
        traffic.repeat(Duration::from_millis(100), move || {
            let burst: Vec<_> = (0..3).map(|_| send(guarded.try_clone())).collect();
            async move {
                futures_util::future::join_all(burst).await;
            }
        });
        let limited = client
            .post(&chat)
            .header("x-pool", "limited")
            .json(&json!({"model": "m1", "messages": [{"role": "user", "content": "hi"}]}));
        traffic.repeat(Duration::from_millis(100), move || {
            send(limited.try_clone())
        });
        let flaky = client.get(format!("http://{public}/flaky"));
        traffic.repeat(Duration::from_millis(50), move || send(flaky.try_clone()));
        let grpc = grpc_check(public);
        traffic.repeat(Duration::from_millis(100), move || send(grpc.try_clone()));
        traffic
    }

    /// Runs `step` then sleeps `pause`, again and again, until stopped.
    fn repeat<F, Fut>(&mut self, pause: Duration, mut step: F)
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let stop = self.stop.clone();
        self.tasks.push(tokio::spawn(async move {
            let end = Instant::now() + LIMIT;
            while !stop.load(Ordering::Relaxed) && Instant::now() < end {
                step().await;
                tokio::time::sleep(pause).await;
            }
        }));
    }

    pub(super) async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            task.await.unwrap();
        }
    }
}

/// Sends `request` (a clone of a built one) and reads the answer to its end.
async fn send(request: Option<reqwest::RequestBuilder>) {
    let request = request.expect("a request without a streamed body clones");
    if let Ok(answer) = request.send().await {
        let _ = answer.bytes().await;
    }
}

/// `grpc.health.v1.Health/Check` over h2c with an empty message, as a gRPC client
/// sends it.
fn grpc_check(public: SocketAddr) -> reqwest::RequestBuilder {
    let h2c = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    h2c.post(format!("http://{public}/grpc.health.v1.Health/Check"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(vec![0u8; 5])
}

/// A connection each time: TCP bytes are counted when one closes.
async fn resp_round(cache: SocketAddr) {
    let Ok(mut conn) = TcpStream::connect(cache).await else {
        return;
    };
    resp(&mut conn, &["SET", "k", "v"]).await;
    resp(&mut conn, &["GET", "k"]).await;
    resp(&mut conn, &["GET", "missing"]).await;
}

/// One RESP command as an array of bulk strings; waits for its reply's first bytes.
async fn resp(conn: &mut TcpStream, args: &[&str]) {
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    conn.write_all(out.as_bytes()).await.unwrap();
    let mut buf = [0u8; 256];
    let n = conn.read(&mut buf).await.unwrap();
    assert!(n > 0, "redis closed the connection");
}
