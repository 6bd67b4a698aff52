//! The Grafana dashboard `deploy/grafana/sluice.json` against a real Prometheus: it
//! scrapes a sluice under traffic that exercises every row (streaming chats on two
//! versions, a rollout that rolls back, a fault experiment, a mirror, a Redis listener),
//! then every panel's query, with the variables substituted the way Grafana does, must
//! parse and return a series with a value.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::{listener, Admin, TestConfig};
use crate::rollout::mock;
use crate::support::{have, redis_available, require, workspace_root, Prometheus, RedisServer};

/// The rows the issue asks for, in the dashboard's order.
const ROWS: [&str; 8] = [
    "Routes",
    "Token timing per version",
    "Rollouts",
    "Faults",
    "Mirror",
    "RESP",
    "GPU and model servers",
    "The proxy itself",
];

fn dashboard() -> Value {
    let path = workspace_root().join("deploy/grafana/sluice.json");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every query panel (not the rows) with its row's title.
fn panels(dashboard: &Value) -> Vec<(String, &Value)> {
    let mut row = String::new();
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        match panel["type"].as_str() {
            Some("row") => row = panel["title"].as_str().unwrap().to_owned(),
            _ => out.push((row.clone(), panel)),
        }
    }
    out
}

#[test]
fn the_dashboard_has_every_row_each_panel_a_query_on_the_datasource_variable() {
    let dashboard = dashboard();
    let rows: Vec<&str> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "row")
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    assert_eq!(rows, ROWS);
    let variables: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(variables, ["datasource", "route", "cluster", "model"]);
    let mut ids = std::collections::HashSet::new();
    for (row, panel) in panels(&dashboard) {
        let title = panel["title"].as_str().unwrap();
        assert!(
            ids.insert(panel["id"].as_u64().unwrap()),
            "{title}: id twice"
        );
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{row} / {title}: no query");
        for t in targets {
            let expr = t["expr"].as_str().unwrap();
            // A GPU or model-server gauge exists only where its source does: those
            // panels say 0 on purpose rather than "no data".
            let optional = expr.contains("sluice_gpu_") && !expr.contains("sluice_gpu_available")
                || expr.contains("sluice_upstream_requests_")
                || expr.contains("sluice_upstream_kv_cache");
            assert_eq!(
                optional,
                expr.ends_with("or vector(0)"),
                "{row} / {title}: {expr}"
            );
        }
    }
}

/// `label_values(SELECTOR, LABEL)` or `label_values(LABEL)`: the selector, if any, and the label.
fn label_values(query: &str) -> (Option<&str>, &str) {
    let inner = query
        .strip_prefix("label_values(")
        .and_then(|q| q.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not label_values: {query}"));
    match inner.rsplit_once(", ") {
        Some((selector, label)) => (Some(selector), label),
        None => (None, inner),
    }
}

/// What Grafana puts for a multi-value variable with every value selected: the values,
/// regex-escaped, as `(a|b)`.
fn all_of(values: &[Value]) -> String {
    let escaped: Vec<String> = values
        .iter()
        .map(|v| {
            let v = v.as_str().unwrap();
            v.chars()
                .flat_map(|c| match r"\.+*?()|[]{}^$".contains(c) {
                    true => vec!['\\', c],
                    false => vec![c],
                })
                .collect()
        })
        .collect();
    format!("({})", escaped.join("|"))
}

fn substitute(expr: &str, variables: &BTreeMap<String, String>) -> String {
    let mut expr = expr
        .replace("$__rate_interval", "1m")
        .replace("$__range", "5m");
    for (name, value) in variables {
        expr = expr.replace(&format!("${name}"), value);
    }
    expr
}

/// The JSON answer, or `null` when there is none yet (Prometheus answers 503 in plain text
/// until its storage is open): the caller retries.
async fn get(prom: &Prometheus, path: &str, query: &[(&str, &str)]) -> Value {
    let client = reqwest::Client::new();
    let r = client.get(format!("{}{path}", prom.url())).query(query);
    match r.send().await {
        Ok(answer) => answer.json().await.unwrap_or(Value::Null),
        Err(_) => Value::Null,
    }
}

/// Each variable's values as Prometheus answers its `label_values` query, the ones
/// before it substituted; an error names a variable without values.
async fn variables(
    prom: &Prometheus,
    dashboard: &Value,
) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for v in dashboard["templating"]["list"].as_array().unwrap() {
        if v["type"] != "query" {
            continue;
        }
        let name = v["name"].as_str().unwrap();
        let (selector, label) = label_values(v["query"]["query"].as_str().unwrap());
        let path = format!("/api/v1/label/{label}/values");
        let selector = selector.map(|s| substitute(s, &out));
        let query: Vec<(&str, &str)> = selector.iter().map(|s| ("match[]", s.as_str())).collect();
        let answer = get(prom, &path, &query).await;
        let values = answer["data"].as_array().cloned().unwrap_or_default();
        if values.is_empty() {
            return Err(format!("variable {name}: no values ({answer})"));
        }
        out.insert(name.to_owned(), all_of(&values));
    }
    Ok(out)
}

/// The queries that failed (did not parse, or answered no series with a number), each
/// with why; and how many were run.
async fn run_queries(prom: &Prometheus, dashboard: &Value) -> (Vec<String>, usize) {
    let variables = match variables(prom, dashboard).await {
        Ok(v) => v,
        Err(e) => return (vec![e], 0),
    };
    let mut failed = Vec::new();
    let mut ran = 0;
    for (row, panel) in panels(dashboard) {
        for target in panel["targets"].as_array().unwrap() {
            let expr = substitute(target["expr"].as_str().unwrap(), &variables);
            ran += 1;
            let answer = get(prom, "/api/v1/query", &[("query", &expr)]).await;
            let result = answer["data"]["result"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let numbers = result
                .iter()
                .filter_map(|s| s["value"][1].as_str()?.parse::<f64>().ok())
                .filter(|v| v.is_finite())
                .count();
            if answer["status"] != "success" || numbers == 0 {
                let title = panel["title"].as_str().unwrap();
                failed.push(format!("{row} / {title}: {expr}\n  -> {answer}"));
            }
        }
    }
    (failed, ran)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_panel_query_returns_series_from_a_real_prometheus() {
    if !require(
        "prometheus and redis-server",
        have("prometheus") && redis_available(),
    ) {
        return;
    }
    let stable = mock("v1", 5).await;
    // Slower than the gate: the rollout rolls back on live traffic.
    let canary = mock("v2", 60).await;
    let shadow = mock("v3", 5).await;
    let redis = RedisServer::start().await.unwrap();
    let sluice = TestConfig::http()
        .listener("cache", "tcp", "cluster: redis")
        // The mock serves no /metrics: the model-server row reads `up` 0 and scrape errors.
        .cluster_with(
            "stable",
            "llm",
            [stable.addr()],
            "version: v1, metrics_path: /metrics",
        )
        .cluster_with("canary", "llm", [canary.addr()], "version: v2")
        .cluster_with("shadow", "llm", [shadow.addr()], "version: v3")
        .cluster("redis", "cache", [redis.addr()])
        .route_with(
            "chat",
            "stable: 100, canary: 0",
            "mirror: { cluster: shadow, percent: 100 }",
        )
        .section(
            "rollouts",
            "\n  - { name: chat-v2, route: chat, stable: stable, canary: canary, steps: [50, 100], \
             hold: 1s, min_requests: 5, interval: 100ms, window: 2s, gates: { ttft_p95: 30ms } }",
        )
        .start();
    let admin = Admin::new(&sluice);
    let fault = json!({"id": "some-503", "percent": 10, "ttl": "5m", "match": {"route": "chat"},
        "action": {"abort": {"status": 503}}});
    let (status, body) = admin.post("/v1/faults", fault.to_string()).await;
    assert_eq!(status, 201, "{body}");
    let prom = Prometheus::start(&[sluice.admin_addr]).await;

    // Traffic until the checks are done (bounded by the deadline below as well).
    let stop = Arc::new(AtomicBool::new(false));
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let mut drivers = Vec::new();
    for _ in 0..3 {
        let (stop, url) = (stop.clone(), url.clone());
        drivers.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let body = json!({"model": "m1", "messages": [{"role": "user", "content": "hi"}],
                "stream": true});
            let end = Instant::now() + Duration::from_secs(120);
            while !stop.load(Ordering::Relaxed) && Instant::now() < end {
                // An error shows as a query without data, and the test says which.
                if let Ok(r) = client.post(&url).json(&body).send().await {
                    let _ = r.bytes().await;
                }
            }
        }));
    }
    let cache = listener(&sluice, "cache");
    let stop_cache = stop.clone();
    drivers.push(tokio::spawn(async move {
        let end = Instant::now() + Duration::from_secs(120);
        while !stop_cache.load(Ordering::Relaxed) && Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(50)).await;
            // A connection each time: TCP bytes are counted when one closes.
            let Ok(mut conn) = TcpStream::connect(cache).await else {
                continue;
            };
            resp(&mut conn, &["SET", "k", "v"]).await;
            resp(&mut conn, &["GET", "k"]).await;
            resp(&mut conn, &["GET", "missing"]).await;
            drop(conn);
        }
    }));

    let dashboard = dashboard();
    let deadline = Instant::now() + Duration::from_secs(60);
    let (failed, ran) = loop {
        let state = admin.get("/v1/rollouts/chat-v2").await.1["state"].clone();
        let (failed, ran) = run_queries(&prom, &dashboard).await;
        if state == "rolled_back" && failed.is_empty() || Instant::now() >= deadline {
            assert_eq!(state, "rolled_back");
            break (failed, ran);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    stop.store(true, Ordering::Relaxed);
    for d in drivers {
        d.await.unwrap();
    }
    assert!(
        failed.is_empty(),
        "{} of {ran} queries failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
    let panels = panels(&dashboard).len();
    assert!(ran >= panels, "{ran} queries for {panels} panels");
    eprintln!("grafana: {panels} panels, {ran} queries run, all returning series");
}
