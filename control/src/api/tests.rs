// Tests may spawn bare tasks (each test's runtime ends with it) and read std time.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use http::Method;
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};
use tokio::net::TcpStream;

use super::*;
use crate::config::Scope;
use crate::observers::Observers;
use crate::testing;

const TOKEN: &str = "s3cret-token";

/// A running control API on loopback; stops when dropped.
struct Server {
    addr: SocketAddr,
    api: Arc<AdminApi>,
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Server {
    async fn start() -> Server {
        Server::start_with(false).await
    }

    /// With `observe`, the GPU watcher and upstream scraper run too.
    async fn start_with(observe: bool) -> Server {
        Server::start_full(observe, &[("default", Scope::Admin, TOKEN)]).await
    }

    /// With the tokens `(name, scope, secret)`.
    async fn with_tokens(tokens: &[(&str, Scope, &str)]) -> Server {
        Server::start_full(false, tokens).await
    }

    async fn start_full(observe: bool, tokens: &[(&str, Scope, &str)]) -> Server {
        let (store, shared) = testing::store(&testing::ab_chat("sticky: { header: x-session-id }"));
        let cancel = CancellationToken::new();
        let observers = match observe {
            true => {
                let gpu = store.load().config.gpu;
                Observers::new(gpu, shared.metrics.registry(), shared.kv_cache.clone()).unwrap()
            }
            false => Observers::default(),
        };
        observers.spawn(&TaskTracker::new(), &store, &cancel);
        let rollouts = Rollouts::new(store.clone(), shared.clone(), observers.clone());
        tokio::spawn(rollouts.clone().run(cancel.clone()));
        let readiness = Arc::new(Readiness::new());
        let auth = Auth::fixed(tokens, shared.metrics.registry());
        let api = AdminApi::new(store, shared, rollouts, observers, readiness, auth);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(serve_admin(listener, api.clone(), None, cancel.clone()));
        Server {
            addr,
            api,
            cancel,
            task: Some(task),
        }
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: &str,
    ) -> (StatusCode, http::HeaderMap, Bytes) {
        let stream = TcpStream::connect(self.addr).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        let conn = tokio::spawn(conn);
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.addr.to_string());
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let req = req.body(Full::new(Bytes::from(body.to_string()))).unwrap();
        let resp = sender.send_request(req).await.unwrap();
        let (parts, body) = resp.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        drop(sender);
        let _ = conn.await;
        (parts.status, parts.headers, bytes)
    }

    /// A call with the right token whose answer is JSON.
    async fn json(&self, method: Method, path: &str, body: &str) -> (StatusCode, Value) {
        let (status, headers, bytes) = self.call(method, path, Some(TOKEN), body).await;
        assert_eq!(headers["content-type"], "application/json");
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    /// The action of every event in the audit log, oldest first.
    async fn actions(&self) -> Vec<String> {
        let (_, events) = self.json(Method::GET, "/v1/events", "").await;
        let events = events["events"].as_array().unwrap();
        let action = |e: &Value| e["action"].as_str().unwrap().to_owned();
        events.iter().map(action).collect()
    }

    async fn stop(mut self) {
        self.cancel.cancel();
        let task = self.task.take().unwrap();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("serve_admin returns after cancel")
            .unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

#[tokio::test]
async fn health_and_metrics_need_no_token() {
    let s = Server::start().await;
    let (status, headers, body) = s.call(Method::GET, "/healthz", None, "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(&body[..], br#"{"status":"ok"}"#);

    let (status, headers, body) = s.call(Method::GET, "/metrics", None, "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "text/plain; version=0.0.4");
    assert!(String::from_utf8_lossy(&body).contains("sluice_snapshot_version 1"));

    let (status, headers, _) = s.call(Method::POST, "/healthz", None, "").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(headers["allow"], "GET");
    s.stop().await;
}

#[tokio::test]
async fn readyz_follows_readiness_and_draining() {
    let s = Server::start().await;
    let get = || s.call(Method::GET, "/readyz", None, "");
    assert_eq!(get().await.0, StatusCode::SERVICE_UNAVAILABLE);
    s.api.readiness.set_ready(true);
    let (status, _, body) = get().await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(&body[..], br#"{"status":"ready"}"#);
    s.api.readiness.set_draining(true);
    let (status, _, body) = get().await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(&body[..], br#"{"status":"draining"}"#);
}

#[tokio::test]
async fn v1_needs_the_right_bearer_token() {
    let s = Server::start().await;
    let unauthorized = json!({"error": "missing or wrong bearer token"});
    for (path, token) in [
        ("/v1/routes", None),
        ("/v1/routes", Some("wrong")),
        ("/v1/routes", Some("s3cret-tokeN")),
        ("/v1/routes", Some("s3cret-token-and-more")),
        ("/v1/no-such-thing", None),
    ] {
        let (status, _, body) = s.call(Method::GET, path, token, "").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path} {token:?}");
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body, unauthorized);
    }
    let (status, routes) = s.json(Method::GET, "/v1/routes", "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        routes,
        json!([{
            "name": "chat",
            "listener": "public",
            "split": {"a": 100, "b": 0},
            "sticky": {"header": "x-session-id"},
        }])
    );
    let (status, body) = s.json(Method::GET, "/v1/no-such-thing", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body,
        json!({"error": "no such endpoint: GET /v1/no-such-thing"})
    );
    let (status, _) = s.json(Method::DELETE, "/v1/routes", "").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn a_split_change_shows_in_routes_and_bumps_the_version() {
    let s = Server::start().await;
    let (status, body) = s
        .json(
            Method::PUT,
            "/v1/routes/chat/split",
            r#"{"a": 80, "b": 20}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"route": "chat", "split": {"a": 80, "b": 20}, "version": 2})
    );
    let (_, routes) = s.json(Method::GET, "/v1/routes", "").await;
    assert_eq!(routes[0]["split"], json!({"a": 80, "b": 20}));
    let (_, config) = s.json(Method::GET, "/v1/config", "").await;
    assert_eq!(config["version"], 2);
    assert_eq!(
        config["config"]["routes"][0]["split"],
        json!({"a": 80, "b": 20})
    );
    assert_eq!(config["hash"], json!(s.api.store.load().hash));

    // The split is replaced, not merged: a cluster left out is gone.
    let (status, body) = s
        .json(Method::PUT, "/v1/routes/chat/split", r#"{"b": 1}"#)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["split"], json!({"b": 1}));
    assert_eq!(body["version"], 3);
}

#[tokio::test]
async fn an_invalid_split_is_refused_and_the_old_one_kept() {
    let s = Server::start().await;
    let (status, body) = s
        .json(Method::PUT, "/v1/routes/chat/split", r#"{"a": 0, "b": 0}"#)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        json!({"errors": [{"path": "routes[0].split", "message": "weights sum to 0"}]})
    );
    let (_, routes) = s.json(Method::GET, "/v1/routes", "").await;
    assert_eq!(routes[0]["split"], json!({"a": 100, "b": 0}));

    for (bad, expected) in [
        (
            r#"{"a": -1}"#,
            json!({"error": "weight must be an integer from 0 to 4294967295, found -1", "path": "split.a"}),
        ),
        (
            r#"{"a": 1, "b": "x"}"#,
            json!({"error": "weight must be an integer from 0 to 4294967295, found \"x\"", "path": "split.b"}),
        ),
        (
            r#"{"a": 1.5}"#,
            json!({"error": "weight must be an integer from 0 to 4294967295, found 1.5", "path": "split.a"}),
        ),
        (
            "[1, 2]",
            json!({"error": "must be a JSON object of cluster weights, found an array", "path": "split"}),
        ),
    ] {
        let (status, body) = s.json(Method::PUT, "/v1/routes/chat/split", bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(body, expected, "{bad}");
    }
    let (status, body) = s.json(Method::PUT, "/v1/routes/chat/split", "a: 1").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["path"], "split");

    let (status, body) = s
        .json(Method::PUT, "/v1/routes/chat/split", r#"{"a": 1, "zz": 1}"#)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["errors"][0]["path"], "routes[0].split.zz");
    assert_eq!(s.api.store.load().version, 1);
}

#[tokio::test]
async fn a_split_on_an_unknown_route_is_404() {
    let s = Server::start().await;
    let (status, body) = s
        .json(Method::PUT, "/v1/routes/nope/split", r#"{"a": 1}"#)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body,
        json!({"error": "unknown route `nope`", "path": "route"})
    );
}

#[tokio::test]
async fn a_config_put_validates_then_swaps() {
    let s = Server::start().await;
    let (status, body) = s
        .json(Method::PUT, "/v1/config", "routes: [ {name: chat")
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["errors"][0]["message"].is_string(), "{body}");

    let mut raw = s.api.store.load().config.raw.clone();
    raw.routes[0].split.insert("b".into(), 0);
    raw.routes[0].split.insert("a".into(), 0);
    let (status, body) = s.json(Method::PUT, "/v1/config", &raw.to_yaml()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        json!({"errors": [{"path": "routes[0].split", "message": "weights sum to 0"}]})
    );
    let (_, config) = s.json(Method::GET, "/v1/config", "").await;
    assert_eq!(config["version"], 1);
    assert_eq!(
        config["config"]["routes"][0]["split"],
        json!({"a": 100, "b": 0})
    );

    // JSON is YAML: the config as GET shows it goes back with one change.
    let mut next = config["config"].clone();
    next["routes"][0]["split"] = json!({"a": 50, "b": 50});
    let (status, body) = s.json(Method::PUT, "/v1/config", &next.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["version"], 2);
    assert_eq!(body["hash"], json!(s.api.store.load().hash));
    let (_, routes) = s.json(Method::GET, "/v1/routes", "").await;
    assert_eq!(routes[0]["split"], json!({"a": 50, "b": 50}));

    // Two rejected and one applied, each a reload from the API.
    let (_, _, metrics) = s.call(Method::GET, "/metrics", None, "").await;
    let metrics = String::from_utf8_lossy(&metrics);
    for series in [
        r#"sluice_config_reloads_total{result="applied",source="api"} 1"#,
        r#"sluice_config_reloads_total{result="rejected",source="api"} 2"#,
    ] {
        assert!(metrics.contains(series), "{series} missing:\n{metrics}");
    }
}

#[tokio::test]
async fn a_body_over_the_limit_is_413() {
    let s = Server::start().await;
    let big = " ".repeat(MAX_BODY_BYTES + 1);
    let (status, body) = s.json(Method::PUT, "/v1/config", &big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        body["error"],
        "request body is over 16777216 bytes (admin.max_body)"
    );
    assert_eq!(s.api.store.load().version, 1);
}

#[tokio::test]
async fn a_chunked_body_over_the_limit_is_413() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = Server::start().await;
    let mut stream = TcpStream::connect(s.addr).await.unwrap();
    let head = format!(
        "PUT /v1/config HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\n\
         transfer-encoding: chunked\r\n\r\n{:x}\r\n",
        MAX_BODY_BYTES + 1
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // The server may answer and close before reading all of it.
    let _ = stream.write_all(&vec![b' '; MAX_BODY_BYTES + 1]).await;
    let _ = stream.write_all(b"\r\n0\r\n\r\n").await;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    assert_eq!(s.api.store.load().version, 1);
}

#[tokio::test]
async fn events_show_applied_and_rejected_changes() {
    let s = Server::start().await;
    s.json(Method::PUT, "/v1/routes/chat/split", r#"{"a": 1}"#)
        .await;
    s.json(Method::PUT, "/v1/routes/chat/split", r#"{"a": 0}"#)
        .await;
    s.json(Method::PUT, "/v1/config", "{").await;
    let (status, body) = s.json(Method::GET, "/v1/events", "").await;
    assert_eq!(status, StatusCode::OK);
    let events = body["events"].as_array().unwrap();
    let summary: Vec<(&str, &str, &str, u64)> = events
        .iter()
        .map(|e| {
            (
                e["source"].as_str().unwrap(),
                e["action"].as_str().unwrap(),
                e["result"].as_str().unwrap(),
                e["version"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("startup", "load config", "applied", 1),
            ("api", "set split of route chat", "applied", 2),
            ("api", "set split of route chat", "rejected", 2),
            ("api", "replace config", "rejected", 2),
        ]
    );
    assert_eq!(
        events[2]["errors"],
        json!(["routes[0].split: weights sum to 0"])
    );

    let (status, _, metrics) = s.call(Method::GET, "/metrics", None, "").await;
    assert_eq!(status, StatusCode::OK);
    assert!(String::from_utf8_lossy(&metrics).contains("sluice_snapshot_version 2"));
}

#[tokio::test]
async fn stats_report_the_window() {
    let s = Server::start().await;
    let (status, body) = s.json(Method::GET, "/v1/stats", "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"window_seconds": 10, "dropped_samples": 0, "stats": []})
    );
}

#[tokio::test]
async fn serve_admin_returns_on_cancel_with_an_idle_connection_open() {
    let s = Server::start().await;
    let idle = TcpStream::connect(s.addr).await.unwrap();
    s.stop().await;
    drop(idle);
}

mod console;
mod faults;
mod limits;
mod load_runs;
mod mirror;
mod observers;
mod rollouts;
mod scopes;

#[tokio::test]
async fn the_recorder_starts_with_a_ttl_shows_and_stops() {
    let s = Server::start().await;
    let dir = std::env::temp_dir().join(format!("sluice-api-recorder-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.jsonl");

    let (status, body) = s.json(Method::GET, "/v1/recorder", "").await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({"recording": false}))
    );
    // A ttl is required, and every error is named.
    let no_ttl = format!(r#"{{"path": "{}"}}"#, path.display());
    let (status, body) = s.json(Method::PUT, "/v1/recorder", &no_ttl).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["errors"][0]["path"], "ttl", "{body}");
    let bad = r#"{"path": "t.jsonl", "ttl": "10m", "routes": ["nope"], "percent": 101}"#;
    let (status, body) = s.json(Method::PUT, "/v1/recorder", bad).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let paths: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["percent", "routes[0]"], "{body}");
    let unwritable = r#"{"path": "/proc/sluice/t.jsonl", "ttl": "10m"}"#;
    let (status, body) = s.json(Method::PUT, "/v1/recorder", unwritable).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    assert_eq!(body["path"], "path", "{body}");

    let good = format!(
        r#"{{"path": "{}", "ttl": "10m", "percent": 50, "routes": ["chat"]}}"#,
        path.display()
    );
    let (status, body) = s.json(Method::PUT, "/v1/recorder", &good).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["recording"], true);
    assert_eq!(body["source"], "api");
    assert_eq!(body["percent"], 50.0);
    assert_eq!(body["time_left"], "10m", "{body}");
    let (_, shown) = s.json(Method::GET, "/v1/recorder", "").await;
    assert_eq!(shown["path"], path.display().to_string());

    let (status, body) = s.json(Method::DELETE, "/v1/recorder", "").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (body["recording"].clone(), body["lines"].clone()),
        (json!(false), json!(0))
    );
    let (status, _) = s.json(Method::DELETE, "/v1/recorder", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let actions = s.actions().await;
    assert!(
        actions.iter().any(|a| a.starts_with("start recorder")),
        "{actions:?}"
    );
    assert!(actions.iter().any(|a| a == "stop recorder"), "{actions:?}");
    let _ = std::fs::remove_dir_all(&dir);
    s.stop().await;
}
