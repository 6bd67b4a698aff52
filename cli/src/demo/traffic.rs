//! The demo's traffic: a fixed number of workers, each sending one
//! streaming chat completion after another through the proxy and reading
//! it to the end, until told to stop. Each request carries a session id
//! from a pool much larger than the worker count, so that the sticky split
//! gives the canary close to its weight's share even at 5%.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Sessions in rotation: with sticky routing each one is a unit of the
/// split, so there must be many more of them than canary percent steps.
const SESSIONS: u64 = 512;
/// A stream slower than this is cut and counted as failed (the slowed
/// canary answers in about half a second).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// After a failure (the proxy not up yet, a refused connection), so that a
/// worker does not spin.
const BACKOFF: Duration = Duration::from_millis(50);
const BODY: &str =
    r#"{"model":"demo","messages":[{"role":"user","content":"Say hello."}],"stream":true}"#;

/// What the clients saw, for the display and the summary.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub sent: AtomicU64,
    pub failed: AtomicU64,
}

/// The running workers; [`Traffic::stop`] ends them and waits.
pub(super) struct Traffic {
    cancel: CancellationToken,
    tracker: TaskTracker,
    pub counters: Arc<Counters>,
}

impl Traffic {
    /// Starts `workers` clients against the proxy at `proxy`. Must be
    /// called inside a tokio runtime.
    pub(super) fn start(proxy: SocketAddr, workers: usize) -> Traffic {
        let cancel = CancellationToken::new();
        let tracker = TaskTracker::new();
        let counters = Arc::new(Counters::default());
        let client: Client<HttpConnector, Full<Bytes>> =
            Client::builder(TokioExecutor::new()).build_http();
        let uri = format!("http://{proxy}/v1/chat/completions");
        for id in 0..workers as u64 {
            tracker.spawn(worker(
                Worker {
                    id,
                    workers: workers as u64,
                    client: client.clone(),
                    uri: uri.clone(),
                    counters: counters.clone(),
                },
                cancel.clone(),
            ));
        }
        tracker.close();
        Traffic {
            cancel,
            tracker,
            counters,
        }
    }

    /// (requests finished, of which failed).
    pub(super) fn counts(&self) -> (u64, u64) {
        (
            self.counters.sent.load(Ordering::Relaxed),
            self.counters.failed.load(Ordering::Relaxed),
        )
    }

    /// Cuts the requests in flight and waits for every worker to end.
    pub(super) async fn stop(self) {
        self.cancel.cancel();
        self.tracker.wait().await;
    }
}

struct Worker {
    id: u64,
    workers: u64,
    client: Client<HttpConnector, Full<Bytes>>,
    uri: String,
    counters: Arc<Counters>,
}

async fn worker(w: Worker, cancel: CancellationToken) {
    let mut n: u64 = 0;
    loop {
        // Workers interleave over the pool, so every session comes round
        // again (and must land on the same version while the steps rise).
        let session = (w.id + n * w.workers) % SESSIONS;
        n += 1;
        let outcome = tokio::select! {
            () = cancel.cancelled() => return,
            r = tokio::time::timeout(REQUEST_TIMEOUT, one(&w, session)) => r,
        };
        let ok = matches!(outcome, Ok(Ok(true)));
        w.counters.sent.fetch_add(1, Ordering::Relaxed);
        if !ok {
            w.counters.failed.fetch_add(1, Ordering::Relaxed);
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(BACKOFF) => {}
            }
        }
    }
}

/// One streaming request read to its end; `true` for a 2xx answer.
async fn one(w: &Worker, session: u64) -> anyhow::Result<bool> {
    let request = http::Request::builder()
        .method("POST")
        .uri(&w.uri)
        .header("content-type", "application/json")
        .header("x-session-id", format!("demo-{session}"))
        .body(Full::new(Bytes::from_static(BODY.as_bytes())))?;
    let response = w.client.request(request).await?;
    let ok = response.status().is_success();
    // Reading the whole stream is what makes the proxy meter its tokens.
    response.into_body().collect().await?;
    Ok(ok)
}
