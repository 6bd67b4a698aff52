//! What the mock received, kept when [`super::MockLlmOptions::record`] is on: a test standing
//! the mock in as a shadow or an upstream reads back every request's head and body.
//!
//! Off by default: benches drive the mock at thousands of requests a second, and a list that
//! only grows, behind a lock, is a test's tool, not a server's.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use hyper::{HeaderMap, Method};
use tokio::sync::Notify;

/// One request as the mock read it, whatever its path (unknown paths are kept too).
#[derive(Clone, Debug)]
pub struct SeenRequest {
    pub method: Method,
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl SeenRequest {
    /// The first value of header `name`, when it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body's top-level `model`, when the body is a JSON object that names one.
    pub fn model(&self) -> Option<String> {
        let body: serde_json::Value = serde_json::from_slice(&self.body).ok()?;
        body.get("model")?.as_str().map(str::to_owned)
    }
}

/// The requests seen so far, in arrival order, and a wake-up for those waiting on a count.
#[derive(Debug, Default)]
pub(super) struct Recorder {
    seen: Mutex<Vec<SeenRequest>>,
    arrived: Notify,
}

impl Recorder {
    pub(super) fn push(&self, request: SeenRequest) {
        self.lock().push(request);
        self.arrived.notify_waiters();
    }

    pub(super) fn seen(&self) -> Vec<SeenRequest> {
        self.lock().clone()
    }

    /// What was seen once `n` requests arrived, or after `within` with fewer.
    pub(super) async fn wait_for(&self, n: usize, within: Duration) -> Vec<SeenRequest> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            // Registered before the count is read, so a push in between still wakes us.
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            if self.lock().len() >= n {
                break;
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                break;
            }
        }
        self.seen()
    }

    /// A test that panicked while holding the lock leaves a list that is still whole.
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<SeenRequest>> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
