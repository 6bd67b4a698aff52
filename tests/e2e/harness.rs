//! Starting sluice in-process for a test: the same `Sluice::start` that
//! `main` uses, on free loopback ports, the config builder the tests write
//! their YAML with, and a client for the control API.

mod config;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_control::Config;
use sluice_proxy::{Sluice, StartOptions};

use crate::support::WAIT_POLL;

pub(crate) use config::TestConfig;

/// Starts sluice from a YAML config. The admin API binds an ephemeral port
/// unless the YAML sets one.
pub(crate) fn start(yaml: &str) -> Sluice {
    let config =
        Config::from_yaml(yaml).unwrap_or_else(|e| panic!("test config invalid:\n{e}\n{yaml}"));
    Sluice::start(config, StartOptions::default()).expect("sluice starts")
}

/// The address of the listener named `name`.
pub(crate) fn listener(sluice: &Sluice, name: &str) -> SocketAddr {
    sluice
        .listeners
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, a)| *a)
        .unwrap_or_else(|| panic!("no listener {name}"))
}

/// The head of a config (admin, runtime and the http listener `public` on `port`) for a test
/// that writes the rest by hand; [`TestConfig`] writes whole configs.
pub(crate) fn http_listener_yaml(port: u16) -> String {
    TestConfig::new()
        .listener_at("public", "http", format!("127.0.0.1:{port}"), "")
        .yaml()
}

/// The http listener `public`, cluster `llm` (`kind: llm, version: v1`) on `upstream` and
/// route `chat` to it: the shape of most tests with one model server.
pub(crate) fn llm_config(upstream: impl std::fmt::Display) -> TestConfig {
    TestConfig::http()
        .cluster_with("llm", "llm", [upstream], "version: v1")
        .route("chat", "llm: 100")
}

pub(crate) struct Admin {
    base: String,
    token: String,
    client: reqwest::Client,
}

impl Admin {
    pub(crate) fn new(sluice: &Sluice) -> Self {
        Self {
            base: format!("http://{}", sluice.admin_addr),
            token: sluice.token.clone(),
            client: reqwest::Client::new(),
        }
    }

    pub(crate) async fn get(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::GET, path, "").await
    }

    pub(crate) async fn put(&self, path: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
        self.send(reqwest::Method::PUT, path, body).await
    }

    pub(crate) async fn post(&self, path: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, body).await
    }

    pub(crate) async fn delete(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::DELETE, path, "").await
    }

    /// One authorised request; the status and the JSON answer (`null` when it is not JSON).
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: impl Into<reqwest::Body>,
    ) -> (u16, Value) {
        let r = self
            .client
            .request(method.clone(), format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .body(body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("admin {method} {path}: {e}"));
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub(crate) async fn set_split(&self, route: &str, split: Value) -> (u16, Value) {
        self.put(&format!("/v1/routes/{route}/split"), split.to_string())
            .await
    }
}

/// `/metrics` once `ready` holds for its text (or after 5 s, for the
/// assertion to show what was there). pingora records a request in its
/// `logging` phase, just after the client got the answer, so a test reading
/// counters right after a response must wait for them.
pub(crate) async fn metrics_when(sluice: &Sluice, ready: impl Fn(&str) -> bool) -> String {
    metrics_within(sluice, Duration::from_secs(5), ready).await
}

/// `/metrics` as it is now.
pub(crate) async fn metrics(sluice: &Sluice) -> String {
    metrics_within(sluice, Duration::ZERO, |_| true).await
}

/// [`metrics_when`], waiting up to `within`.
pub(crate) async fn metrics_within(
    sluice: &Sluice,
    within: Duration,
    ready: impl Fn(&str) -> bool,
) -> String {
    let url = format!("http://{}/metrics", sluice.admin_addr);
    let deadline = Instant::now() + within;
    loop {
        let text = get_text(&url).await;
        if ready(&text) || Instant::now() >= deadline {
            return text;
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}

/// The body of `GET url`, whatever its status.
pub(crate) async fn get_text(url: &str) -> String {
    let response = reqwest::get(url).await;
    let response = response.unwrap_or_else(|e| panic!("GET {url}: {e}"));
    response.text().await.expect("a text body")
}

/// The answer to `GET url` with header `name: value`.
pub(crate) async fn get_with_header(url: &str, name: &str, value: &str) -> reqwest::Response {
    let request = reqwest::Client::new().get(url).header(name, value);
    let response = request.send().await;
    response.unwrap_or_else(|e| panic!("GET {url}: {e}"))
}

/// The JSON answer to `request`, whatever its status.
pub(crate) async fn json_of(request: reqwest::RequestBuilder) -> Value {
    let response = request.send().await.expect("an answer");
    response.json().await.expect("a JSON body")
}

/// The sum of the series `name` whose labels include every pair in `labels`
/// (`None` when none does): a family split by a label the test does not
/// name, such as `source` (`user` and `load`), is added up over it.
pub(crate) fn metric_value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(None, |sum, v| Some(sum.unwrap_or(0.0) + v))
}
