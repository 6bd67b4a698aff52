//! The Grafana dashboard `deploy/grafana/sluice.json` against a real Prometheus: it
//! scrapes a sluice under traffic that exercises every row (streaming chats on two
//! versions, a rollout that rolls back, a fleet rollout whose target drifts, a fault
//! experiment, a mirror, a Redis listener, a breaker that overflows, an endpoint ejected,
//! a rate limit with a Redis store, gRPC calls, traces exported to a real collector, a
//! config file reloaded), then every panel's query and every annotation's, with the
//! variables substituted the way Grafana does, must parse and return a series with a
//! value.

mod grpc_upstream;
mod traffic;
mod world;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::otlp::collector::rotel_agent;
use crate::support::{have, redis_available, require, workspace_root, Prometheus};
use traffic::Traffic;
use world::World;

/// The rows the issue asks for, in the dashboard's order.
const ROWS: [&str; 10] = [
    "Routes",
    "Token timing per version",
    "Rollouts",
    "Faults",
    "Reliability",
    "Rate limits",
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

/// Every annotation's name and query.
fn annotations(dashboard: &Value) -> Vec<(&str, &str)> {
    dashboard["annotations"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let name = a["name"].as_str().unwrap();
            let expr = a["target"]["expr"].as_str();
            (
                name,
                expr.unwrap_or_else(|| panic!("annotation {name}: no query")),
            )
        })
        .collect()
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
    // Rollbacks and config reloads marked on every panel, each where its counter rose.
    let names: Vec<&str> = annotations(&dashboard).iter().map(|a| a.0).collect();
    assert_eq!(names, ["Rollbacks", "Config reloads"]);
    for (annotation, (name, expr)) in dashboard["annotations"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .zip(annotations(&dashboard))
    {
        assert_eq!(annotation["datasource"]["uid"], "${datasource}", "{name}");
        assert_eq!(annotation["enable"], true, "{name}");
        assert!(
            expr.contains("increase(") && expr.ends_with(" > 0"),
            "{name}: {expr}"
        );
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
/// with why; and how many were run: panels' queries, annotations' queries.
async fn run_queries(prom: &Prometheus, dashboard: &Value) -> (Vec<String>, usize, usize) {
    let variables = match variables(prom, dashboard).await {
        Ok(v) => v,
        Err(e) => return (vec![e], 0, 0),
    };
    let mut queries = Vec::new();
    for (row, panel) in panels(dashboard) {
        let title = panel["title"].as_str().unwrap();
        for target in panel["targets"].as_array().unwrap() {
            queries.push((format!("{row} / {title}"), target["expr"].as_str().unwrap()));
        }
    }
    let panel_queries = queries.len();
    for (name, expr) in annotations(dashboard) {
        queries.push((format!("annotation {name}"), expr));
    }
    let mut failed = Vec::new();
    for (i, (what, expr)) in queries.iter().enumerate() {
        let expr = substitute(expr, &variables);
        let answer = if i < panel_queries {
            get(prom, "/api/v1/query", &[("query", &expr)]).await
        } else {
            over_the_view(prom, &expr).await
        };
        let result = answer["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        // An instant vector's `value`, or a range's `values`.
        let numbers = result
            .iter()
            .flat_map(|s| match s["values"].as_array() {
                Some(values) => values.clone(),
                None => vec![s["value"].clone()],
            })
            .filter_map(|v| v[1].as_str()?.parse::<f64>().ok())
            .filter(|v| v.is_finite())
            .count();
        if answer["status"] != "success" || numbers == 0 {
            failed.push(format!("{what}: {expr}\n  -> {answer}"));
        }
    }
    (failed, panel_queries, queries.len() - panel_queries)
}

/// `expr` as Grafana runs an annotation's query: a range query over the view (the last
/// 5 minutes), so an event is found wherever it is in the view, not only in the last
/// `$__rate_interval`.
async fn over_the_view(prom: &Prometheus, expr: &str) -> Value {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let (start, end) = ((now - 300).to_string(), now.to_string());
    let query = [
        ("query", expr),
        ("start", &start),
        ("end", &end),
        ("step", "1"),
    ];
    get(prom, "/api/v1/query_range", &query).await
}

/// What the traffic must have made happen, not only exported at 0: each new panel's
/// source, read from Prometheus; the ones not seen yet.
const DRIVEN: [&str; 9] = [
    "sum(sluice_circuit_breaker_overflow_total)",
    "sum(sluice_outlier_ejections_total)",
    r#"sum(sluice_ratelimit_decisions_total{result="limited"})"#,
    "min(sluice_ratelimit_store_up)",
    r#"sum(sluice_grpc_requests_total{grpc_status="0"})"#,
    "sum(sluice_trace_spans_exported_total)",
    "sum(sluice_fleet_drift_total)",
    "sum(sluice_rollout_rollbacks_total)",
    r#"sum(sluice_config_reloads_total{source="file", result="applied"})"#,
];

async fn not_driven_yet(prom: &Prometheus) -> Vec<&'static str> {
    let mut missing = Vec::new();
    for query in DRIVEN {
        if !prom.query(query).await.is_some_and(|v| v > 0.0) {
            missing.push(query);
        }
    }
    missing
}

/// Waits until Prometheus has scraped sluice once: the rollback and the reload must
/// be seen to rise from 0, so nothing happens before.
async fn first_scrape(prom: &Prometheus) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while prom.query("sluice_snapshot_version").await.is_none() {
        assert!(Instant::now() < deadline, "prometheus never scraped sluice");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_panel_query_returns_series_from_a_real_prometheus() {
    let rotel = rotel_agent();
    if !require(
        "prometheus, redis-server and rotel (.venv)",
        have("prometheus") && redis_available() && rotel.is_some(),
    ) {
        return;
    }
    let world = World::start(rotel.as_ref().unwrap()).await;
    let fault = json!({"id": "some-503", "percent": 10, "ttl": "5m", "match": {"route": "chat"},
        "action": {"abort": {"status": 503}}});
    let (status, body) = world.admin.post("/v1/faults", fault.to_string()).await;
    assert_eq!(status, 201, "{body}");
    let prom = Prometheus::start(&[world.sluice.admin_addr]).await;
    first_scrape(&prom).await;
    let traffic = Traffic::start(&world.sluice);

    let dashboard = dashboard();
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut reloaded, mut drifted) = (false, false);
    let (failed, queries, marks, missing) = loop {
        let state = world.admin.get("/v1/rollouts/chat-v2").await.1["state"].clone();
        // After the rollback, not before: a reload mid-rollout moves its weights.
        if state == "rolled_back" && !reloaded {
            world.touch_config();
            reloaded = true;
        }
        if !drifted {
            drifted = world.drift_fleet().await;
        }
        let (failed, queries, marks) = run_queries(&prom, &dashboard).await;
        let missing = not_driven_yet(&prom).await;
        let done = state == "rolled_back" && failed.is_empty() && missing.is_empty();
        if done || Instant::now() >= deadline {
            assert_eq!(state, "rolled_back");
            break (failed, queries, marks, missing);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    traffic.stop().await;
    assert!(
        failed.is_empty(),
        "{} of {} queries failed:\n{}",
        failed.len(),
        queries + marks,
        failed.join("\n")
    );
    assert!(missing.is_empty(), "not seen rising above 0: {missing:?}");
    let panels = panels(&dashboard).len();
    assert!(queries >= panels, "{queries} queries for {panels} panels");
    eprintln!(
        "grafana: {panels} panels, {queries} queries and {marks} annotations run, all returning series"
    );
}
