//! What changes under the integrity run's traffic, through the control API
//! as an operator would change it: the split swaps every tick (100 ms),
//! a delay experiment comes and another goes every third tick, and every
//! `reload_ticks` the whole config is read back and `PUT` again (a reload,
//! which also clears the experiments the API added).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;

/// Each change's count by what the API answered, e.g. `split 200`.
pub type ChurnCounts = BTreeMap<String, u64>;

pub(crate) struct Admin {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
    token: String,
}

impl Admin {
    pub(crate) fn new(addr: SocketAddr, token: &str) -> Self {
        Admin {
            client: Client::builder(TokioExecutor::new()).build_http(),
            base: format!("http://{addr}"),
            token: token.to_owned(),
        }
    }

    /// One call: its status and body (status 0 when there was no answer).
    pub(crate) async fn call(&self, method: Method, path: &str, body: String) -> (u16, Bytes) {
        let request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)));
        let Ok(request) = request else {
            return (0, Bytes::new());
        };
        match self.client.request(request).await {
            Ok(response) => {
                let status = response.status().as_u16();
                let body = response
                    .into_body()
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                (status, body)
            }
            Err(_) => (0, Bytes::new()),
        }
    }
}

/// Changes things every `tick` until `stop`; the route `r` splits over
/// clusters `a` and `b`.
pub(crate) async fn run(
    admin: Admin,
    tick: Duration,
    reload_ticks: u64,
    stop: Arc<AtomicBool>,
) -> ChurnCounts {
    let mut counts = ChurnCounts::new();
    let mut note = |what: &str, status: u16| {
        *counts.entry(format!("{what} {status}")).or_default() += 1;
    };
    let mut interval = tokio::time::interval(tick);
    let mut k: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        interval.tick().await;
        k += 1;
        let (a, b) = if k.is_multiple_of(2) {
            (80, 20)
        } else {
            (20, 80)
        };
        let body = format!(r#"{{"a": {a}, "b": {b}}}"#);
        note(
            "split",
            admin.call(Method::PUT, "/v1/routes/r/split", body).await.0,
        );
        if k.is_multiple_of(3) {
            let id = format!("churn-{k}");
            let fault = format!(
                r#"{{"id": "{id}", "ttl": "10s", "percent": 30, "match": {{"route": "r"}}, "action": {{"delay": {{"delay": "2ms", "jitter": "1ms"}}}}}}"#
            );
            note(
                "fault add",
                admin.call(Method::POST, "/v1/faults", fault).await.0,
            );
            if k >= 6 {
                let old = format!("/v1/faults/churn-{}", k - 3);
                note(
                    "fault remove",
                    admin.call(Method::DELETE, &old, String::new()).await.0,
                );
            }
        }
        if k.is_multiple_of(reload_ticks) {
            let (status, body) = admin.call(Method::GET, "/v1/config", String::new()).await;
            let config = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| serde_json::to_string(&v["config"]).ok());
            match config {
                Some(config) if status == 200 => {
                    note(
                        "reload",
                        admin.call(Method::PUT, "/v1/config", config).await.0,
                    );
                }
                _ => note("reload read", status),
            }
        }
    }
    counts
}
