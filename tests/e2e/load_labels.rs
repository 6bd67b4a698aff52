//! Load traffic through the real data plane: `x-sluice-load` from a trusted
//! peer labels the request (`source="load"` on the metrics, `load_run` in the
//! access log and the recorder's trace, the header passed on); from any other
//! peer the header is stripped before the upstream sees it and the request
//! counts as a user's; and a rollout with `gates.exclude_load` is not moved by
//! a load test however slow the canary is for it.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sluice_cli::{MockLlm, MockLlmOptions};
use sluice_filters::{parse_lines, LOAD_HEADER, SERVED_CLUSTER_HEADER, SERVED_VERSION_HEADER};

use sluice_proxy::Sluice;

use crate::harness::{listener, metric_value, metrics, start, Admin, TestConfig};
use crate::recorder::poll_recording;
use crate::support::{NamedUpstream, TempDir};

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// The echo upstream's view of one request: the headers it got.
async fn send(client: &reqwest::Client, url: &str, load: Option<&str>) -> Value {
    send_served(client, url, load).await.0
}

/// The headers the upstream got, and the cluster and version the answer
/// named (sluice's `x-sluice-cluster`, `x-sluice-version`).
async fn send_served(
    client: &reqwest::Client,
    url: &str,
    load: Option<&str>,
) -> (Value, Option<String>, Option<String>) {
    let mut req = client.get(url).header("traceparent", TRACEPARENT);
    if let Some(run) = load {
        req = req.header(LOAD_HEADER, run);
    }
    let r = req.send().await.unwrap();
    assert_eq!(r.status(), 200);
    let header = |name: &str| {
        r.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let (cluster, version) = (header(SERVED_CLUSTER_HEADER), header(SERVED_VERSION_HEADER));
    (
        r.json::<Value>().await.unwrap()["headers"].clone(),
        cluster,
        version,
    )
}

/// `sluice_requests_total` of route `all` by source, and the stripped counts.
async fn counts(sluice: &Sluice) -> (f64, f64, f64, f64) {
    let text = metrics(sluice).await;
    let requests = |source| {
        metric_value(
            &text,
            "sluice_requests_total",
            &[
                ("cluster", "up"),
                ("source", source),
                ("status_class", "2xx"),
            ],
        )
        .unwrap_or(0.0)
    };
    let stripped = |reason| {
        metric_value(
            &text,
            "sluice_load_header_stripped_total",
            &[("reason", reason)],
        )
        .unwrap_or(0.0)
    };
    (
        requests("load"),
        requests("user"),
        stripped("untrusted"),
        stripped("invalid"),
    )
}

fn config(up: &NamedUpstream, dir: &TempDir, load: &str) -> String {
    TestConfig::http()
        .cluster("up", "http", [up.addr()])
        .route("all", "up: 100")
        .section(
            "telemetry",
            format!(
                "{{ access_log: {{ path: \"{}\" }} }}",
                dir.path().join("access.log").display()
            ),
        )
        .section(
            "recorder",
            format!(
                "{{ path: \"{}\", percent: 100 }}",
                dir.path().join("trace.jsonl").display()
            ),
        )
        .section("load", load)
        .yaml()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_peers_mark_labels_the_request_everywhere() {
    let up = NamedUpstream::start("up").await.unwrap();
    let dir = TempDir::new("load-labels");
    // The default: loopback is trusted.
    let sluice = start(&config(&up, &dir, "{}"));
    let admin = Admin::new(&sluice);
    poll_recording(&admin).await;
    let url = format!("http://{}/x", listener(&sluice, "public"));
    let client = reqwest::Client::new();

    // Load traffic is told who served it; a user is not.
    let (seen, cluster, version) = send_served(&client, &url, Some("load-00000000000000ab")).await;
    assert_eq!(seen[LOAD_HEADER], "load-00000000000000ab", "{seen}");
    assert_eq!(
        (cluster.as_deref(), version.as_deref()),
        (Some("up"), Some(""))
    );
    let (seen, cluster, version) = send_served(&client, &url, None).await;
    assert!(seen.get(LOAD_HEADER).is_none(), "{seen}");
    assert_eq!((cluster, version), (None, None));
    // Not a run id: stripped, counted, and a user's request.
    let seen = send(&client, &url, Some("not/a run id")).await;
    assert!(seen.get(LOAD_HEADER).is_none(), "{seen}");

    let deadline = Instant::now() + Duration::from_secs(5);
    let got = loop {
        let got = counts(&sluice).await;
        if got.0 + got.1 >= 3.0 || Instant::now() > deadline {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(got, (1.0, 2.0, 0.0, 1.0));

    let (status, _) = admin.delete("/v1/recorder").await;
    assert_eq!(status, 200);
    drop(sluice); // flushes and closes the access log
    let log = std::fs::read_to_string(dir.path().join("access.log")).unwrap();
    let runs: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["load_run"].clone())
        .collect();
    assert_eq!(
        runs,
        [json!("load-00000000000000ab"), Value::Null, Value::Null]
    );
    let trace = std::fs::read_to_string(dir.path().join("trace.jsonl")).unwrap();
    let lines: Vec<_> = parse_lines(&trace).map(Result::unwrap).collect();
    let runs: Vec<Option<&str>> = lines.iter().map(|l| l.load_run.as_deref()).collect();
    assert_eq!(runs, [Some("load-00000000000000ab"), None, None]);
    // The recorder's trace id is the client's, so a load client's row joins it.
    assert!(lines
        .iter()
        .all(|l| l.trace_id.as_deref() == Some("4bf92f3577b34da6a3ce929d0e0e4736")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_peers_mark_is_stripped_and_counted_as_a_users() {
    let up = NamedUpstream::start("up").await.unwrap();
    let dir = TempDir::new("load-untrusted");
    // Loopback, where the test's client is, is not trusted here.
    let sluice = start(&config(&up, &dir, "{ trusted_peers: [10.0.0.0/8] }"));
    let admin = Admin::new(&sluice);
    poll_recording(&admin).await;
    let url = format!("http://{}/x", listener(&sluice, "public"));
    let client = reqwest::Client::new();
    for _ in 0..2 {
        let (seen, cluster, _) = send_served(&client, &url, Some("load-00000000000000ab")).await;
        assert!(seen.get(LOAD_HEADER).is_none(), "{seen}");
        assert_eq!(cluster, None);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let got = loop {
        let got = counts(&sluice).await;
        if got.1 >= 2.0 || Instant::now() > deadline {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(got, (0.0, 2.0, 2.0, 0.0));
    admin.delete("/v1/recorder").await;
    drop(sluice);
    let log = std::fs::read_to_string(dir.path().join("access.log")).unwrap();
    assert!(!log.contains("load_run"), "{log}");
    let trace = std::fs::read_to_string(dir.path().join("trace.jsonl")).unwrap();
    assert!(parse_lines(&trace).all(|l| l.unwrap().load_run.is_none()));
}

/// A rollout whose canary answers in 400 ms, against a 150 ms gate, while
/// only load traffic flows; its state after `for_` of it.
async fn rollout_under_load(exclude_load: bool, for_: Duration) -> Value {
    let stable = MockLlm::start(MockLlmOptions::paced_ms(10, 2, 2))
        .await
        .unwrap();
    let canary = MockLlm::start(MockLlmOptions::paced_ms(400, 2, 2))
        .await
        .unwrap();
    let yaml = TestConfig::http()
        .cluster_with("stable", "llm", [stable.addr()], "version: v1")
        .cluster_with("canary", "llm", [canary.addr()], "version: v2")
        .route("chat", "stable: 100, canary: 0")
        .section(
            "rollouts",
            format!(
                "\n  - {{ name: chat-v2, route: chat, stable: stable, canary: canary, steps: [50, 100], \
                 hold: 1s, min_requests: 5, interval: 100ms, window: 2s, \
                 gates: {{ ttft_p95: 150ms, exclude_load: {exclude_load} }} }}"
            ),
        )
        .yaml();
    let sluice = start(&yaml);
    let admin = Admin::new(&sluice);
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = Vec::new();
    for _ in 0..6 {
        let (url, stop) = (url.clone(), stop.clone());
        workers.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            for _ in 0..500 {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let r = client
                    .post(&url)
                    .header(LOAD_HEADER, "load-00000000000000cd")
                    .json(&json!({"messages": [{"role": "user", "content": "hi"}], "stream": true}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
                r.bytes().await.unwrap();
            }
        }));
    }
    let started = Instant::now();
    let mut status = Value::Null;
    while started.elapsed() < for_ {
        status = admin.get("/v1/rollouts/chat-v2").await.1;
        if status["state"] == "rolled_back" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    let text = metrics(&sluice).await;
    let load = metric_value(
        &text,
        "sluice_requests_total",
        &[
            ("cluster", "canary"),
            ("source", "load"),
            ("status_class", "2xx"),
        ],
    );
    assert!(
        load.unwrap_or(0.0) >= 5.0,
        "the canary saw load traffic: {load:?}"
    );
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_that_excludes_load_is_not_moved_by_it() {
    // Load traffic counts by default: the slow canary is rolled back.
    let counted = rollout_under_load(false, Duration::from_secs(15)).await;
    assert_eq!(counted["state"], "rolled_back", "{counted}");
    // Excluded, the gate has no user sample to judge: nothing moves.
    let excluded = rollout_under_load(true, Duration::from_secs(4)).await;
    assert_eq!(
        (&excluded["state"], &excluded["weight"]),
        (&json!("progressing"), &json!(50)),
        "{excluded}"
    );
    assert_eq!(excluded["gates"]["ttft_p95"]["samples"], 0, "{excluded}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_load_rows_join_the_recorders_lines_by_trace_id() {
    let mock = MockLlm::start(MockLlmOptions::paced_ms(5, 1, 3))
        .await
        .unwrap();
    let dir = TempDir::new("load-join");
    let trace = dir.path().join("trace.jsonl");
    let sluice = crate::recorder::recording_sluice(mock.addr(), &trace);
    let admin = Admin::new(&sluice);
    poll_recording(&admin).await;
    let scenario = dir.write(
        "scenario.yaml",
        &format!(
            "scenario: join\ntarget: {{ base_url: \"http://{}\" }}\n\
             workload: {{ arrival: {{ kind: constant, rate: 20 }}, duration: 1s, seed: 3 }}\n\
             steps:\n  - {{ name: answer, service: llm, prompt: {{ template: hi }}, max_tokens: 3 }}\n",
            listener(&sluice, "public")
        ),
    );
    let out = dir.path().join("run.json");
    let run = crate::cli::sluice(vec![
        "load".into(),
        scenario.display().to_string(),
        "--detailed".into(),
        "-o".into(),
        out.display().to_string(),
    ])
    .await;
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let (status, _) = admin.delete("/v1/recorder").await;
    assert_eq!(status, 200);
    let result: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let run_id = result["run_id"].as_str().unwrap().to_owned();
    let rows = result["requests"].as_array().unwrap();
    assert!(rows.len() >= 15, "{}", rows.len());
    let lines: Vec<_> = parse_lines(&std::fs::read_to_string(&trace).unwrap())
        .map(Result::unwrap)
        .collect();
    assert_eq!(lines.len(), rows.len());
    for row in rows {
        let id = row["trace_id"].as_str().unwrap();
        assert_eq!(id.len(), 32, "{row}");
        let line = lines
            .iter()
            .find(|l| l.trace_id.as_deref() == Some(id))
            .unwrap_or_else(|| panic!("no trace line for {id}"));
        assert_eq!(line.load_run.as_deref(), Some(run_id.as_str()));
    }
}
