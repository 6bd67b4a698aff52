//! A small HTTP/1.1 client for the control plane's own calls: Prometheus
//! queries and the fleet targets' control APIs. Plain HTTP only (config
//! validation refuses `https` for these), pooled, and every call bounded
//! by one timeout covering connect, answer and body.

use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

/// An answer read whole.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: StatusCode,
    pub body: Bytes,
}

#[derive(Clone)]
pub(crate) struct HttpClient {
    inner: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
    max_body: usize,
}

impl HttpClient {
    /// A client whose calls end after `timeout`, and refuse bodies over
    /// `max_body` bytes.
    pub(crate) fn new(timeout: Duration, max_body: usize) -> HttpClient {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(timeout));
        connector.set_nodelay(true);
        let inner = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(connector);
        HttpClient {
            inner,
            timeout,
            max_body,
        }
    }

    /// The same client (and connection pool) with calls bounded by
    /// `timeout` instead.
    pub(crate) fn within(&self, timeout: Duration) -> HttpClient {
        HttpClient {
            inner: self.inner.clone(),
            timeout,
            max_body: self.max_body,
        }
    }

    /// Sends `req` and reads the answer whole; `Err` says what went wrong
    /// in words fit for a status page.
    pub(crate) async fn send(&self, req: Request<Full<Bytes>>) -> Result<Answer, String> {
        let call = async {
            let resp = self.inner.request(req).await.map_err(|e| chain(&e))?;
            let status = resp.status();
            let body = Limited::new(resp.into_body(), self.max_body)
                .collect()
                .await
                .map_err(|e| format!("reading the body: {e}"))?
                .to_bytes();
            Ok(Answer { status, body })
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(format!("no answer within {:?}", self.timeout)),
        }
    }
}

/// An error with its causes: the legacy client's own text says little
/// ("client error (Connect)").
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `text` cut to `max` characters, for error messages quoting a body.
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}
