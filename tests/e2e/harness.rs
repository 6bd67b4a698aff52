//! Starting sluice in-process for a test: the same `Sluice::start` that
//! `main` uses, on free loopback ports, plus a client for its control API.

use std::net::SocketAddr;

use serde_json::Value;
use sluice_control::Config;
use sluice_proxy::{Sluice, StartOptions};

/// Starts sluice from a YAML config. The admin API binds an ephemeral port
/// unless the YAML sets one.
pub fn start(yaml: &str) -> Sluice {
    let config =
        Config::from_yaml(yaml).unwrap_or_else(|e| panic!("test config invalid:\n{e}\n{yaml}"));
    Sluice::start(config, StartOptions::default()).expect("sluice starts")
}

/// The address of the listener named `name`.
pub fn listener(sluice: &Sluice, name: &str) -> SocketAddr {
    sluice
        .listeners
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, a)| *a)
        .unwrap_or_else(|| panic!("no listener {name}"))
}

/// `admin: {listen: 127.0.0.1:0}` plus one http listener on a free port,
/// for tests that need nothing special.
pub fn http_listener_yaml(port: u16) -> String {
    http_listener_yaml_with_runtime(port, "threads: 2, grace_period: 5s")
}

/// As [`http_listener_yaml`], with `runtime` as the runtime section's flow map body.
pub fn http_listener_yaml_with_runtime(port: u16, runtime: &str) -> String {
    format!(
        "admin: {{ listen: 127.0.0.1:0 }}\nruntime: {{ {runtime} }}\nlisteners:\n  - {{ name: public, listen: 127.0.0.1:{port}, protocol: http }}\n"
    )
}

pub struct Admin {
    base: String,
    token: String,
    client: reqwest::Client,
}

impl Admin {
    pub fn new(sluice: &Sluice) -> Self {
        Self {
            base: format!("http://{}", sluice.admin_addr),
            token: sluice.token.clone(),
            client: reqwest::Client::new(),
        }
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .client
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .expect("admin GET");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn put(&self, path: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
        let r = self
            .client
            .put(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .body(body)
            .send()
            .await
            .expect("admin PUT");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn post(&self, path: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
        let r = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .body(body)
            .send()
            .await
            .expect("admin POST");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn delete(&self, path: &str) -> (u16, Value) {
        let r = self
            .client
            .delete(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .expect("admin DELETE");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn set_split(&self, route: &str, split: Value) -> (u16, Value) {
        self.put(&format!("/v1/routes/{route}/split"), split.to_string())
            .await
    }
}

/// `/metrics` once `ready` holds for its text (or after 5 s, for the
/// assertion to show what was there). pingora records a request in its
/// `logging` phase, just after the client got the answer, so a test reading
/// counters right after a response must wait for them.
pub async fn metrics_when(sluice: &Sluice, ready: impl Fn(&str) -> bool) -> String {
    let url = format!("http://{}/metrics", sluice.admin_addr);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let text = reqwest::get(&url)
            .await
            .expect("GET /metrics")
            .text()
            .await
            .expect("metrics text");
        if ready(&text) || std::time::Instant::now() > deadline {
            return text;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
