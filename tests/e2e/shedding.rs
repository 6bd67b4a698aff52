//! Adaptive shedding against the queueing mock (4 answers at once, ~215 ms
//! each: about 18 a second), pushed past its capacity by a scripted open-loop
//! client of two classes, `interactive` (5 a second) and `batch` (30 a
//! second). The TTFT p95 of the mock's queue crosses its bound: sluice sheds
//! batch (503, `retry-after`, `x-sluice-error: shed`, an OpenAI error body),
//! never interactive; the level change is an event with its evidence; and
//! once the load stops the level comes back to 0 by itself (in two steps).

use std::num::NonZeroUsize;
use std::time::Duration;

use serde_json::Value;
use sluice_cli::{MockLlm, MockLlmOptions};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::harness::{self, metric_value, Admin, TestConfig};

/// What one request of the scripted client got.
#[derive(Debug)]
struct Got {
    class: &'static str,
    status: u16,
    retry_after: Option<String>,
    error_header: Option<String>,
    body: String,
}

/// One streamed chat completion of `class`; the body read to its end.
async fn send(client: reqwest::Client, url: String, class: &'static str) -> Option<Got> {
    let response = client
        .post(url)
        .header("x-priority", class)
        .json(&serde_json::json!({
            "model": "mock-llm",
            "stream": true,
            "messages": [{"role": "user", "content": "hello"}],
        }))
        .send()
        .await
        .ok()?;
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (retry_after, error_header) = (header("retry-after"), header("x-sluice-error"));
    let status = response.status().as_u16();
    let body = response.text().await.ok()?;
    Some(Got {
        class,
        status,
        retry_after,
        error_header,
        body,
    })
}

/// Sends `class` at `per_second` for `length`, on the schedule (open loop).
async fn class_load(
    url: String,
    class: &'static str,
    per_second: u64,
    length: Duration,
) -> Vec<Got> {
    let client = reqwest::Client::new();
    let mut tick = tokio::time::interval(Duration::from_millis(1000 / per_second));
    let end = Instant::now() + length;
    let mut sent = JoinSet::new();
    while Instant::now() < end {
        tick.tick().await;
        sent.spawn(send(client.clone(), url.clone(), class));
    }
    sent.join_all().await.into_iter().flatten().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_capacity_batch_is_shed_interactive_passes_and_the_level_comes_back() {
    let mock = MockLlm::start(MockLlmOptions {
        max_concurrency: NonZeroUsize::new(4),
        ..MockLlmOptions::paced_ms(20, 5, 40)
    })
    .await
    .unwrap();
    let sluice = TestConfig::http()
        .cluster_with("llm", "llm", [mock.addr()], "version: v1")
        .route_with(
            "chat",
            "llm: 100",
            "shedding: { priority: { levels: [interactive, batch] }, \
             bounds: { ttft_p95: 300ms }, window: 2s, interval: 250ms, hold: 1s, \
             min_requests: 5, retry_after: 1s, restore_steps: 2 }",
        )
        .start();
    let url = format!(
        "http://{}/v1/chat/completions",
        harness::listener(&sluice, "public")
    );
    let length = Duration::from_secs(8);
    let (interactive, batch) = tokio::join!(
        class_load(url.clone(), "interactive", 5, length),
        class_load(url.clone(), "batch", 30, length),
    );

    // Interactive: every request answered, none shed.
    assert!(interactive.len() >= 30, "{}", interactive.len());
    let refused: Vec<&Got> = interactive.iter().filter(|g| g.status != 200).collect();
    assert!(refused.is_empty(), "{refused:?}");
    // Batch: some answered, some shed with the 503 the issue asks for.
    let shed: Vec<&Got> = batch.iter().filter(|g| g.status == 503).collect();
    assert!(!shed.is_empty(), "no batch request was shed");
    assert!(batch.iter().any(|g| g.status == 200));
    for g in &shed {
        assert_eq!(g.class, "batch");
        assert_eq!(g.retry_after.as_deref(), Some("1"), "{g:?}");
        assert_eq!(g.error_header.as_deref(), Some("shed"), "{g:?}");
        let body: Value = serde_json::from_str(&g.body).unwrap();
        assert_eq!(body["error"]["code"], "overloaded", "{g:?}");
        assert_eq!(body["error"]["type"], "server_error", "{g:?}");
    }
    assert!(
        batch.iter().all(|g| g.status == 200 || g.status == 503),
        "{:?}",
        batch.iter().map(|g| g.status).collect::<Vec<_>>()
    );

    // The change of level is an event, with the signal that crossed its bound.
    let admin = Admin::new(&sluice);
    let (status, events) = admin.get("/v1/events").await;
    assert_eq!(status, 200);
    let shedding: Vec<&Value> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["source"] == "shedding")
        .collect();
    let raised = shedding
        .iter()
        .find(|e| e["evidence"]["to"].as_f64() == Some(1.0))
        .unwrap_or_else(|| panic!("no raise among {shedding:?}"));
    assert_eq!(raised["evidence"]["route"], "chat");
    assert_eq!(raised["evidence"]["from"].as_f64(), Some(0.0), "{raised}");
    let signal = &raised["evidence"]["signals"][0];
    assert_eq!(signal["signal"], "ttft_p95", "{raised}");
    assert_eq!(signal["bound"], 300.0, "{raised}");
    assert_eq!(signal["breached"], true, "{raised}");
    assert!(signal["value"].as_f64().unwrap() > 300.0, "{raised}");
    let action = raised["action"].as_str().unwrap();
    assert!(
        action.starts_with("route chat: shedding level 0 -> 1: ttft_p95 "),
        "{action}"
    );

    // What the client counted is what sluice counted.
    let text = harness::metrics_when(&sluice, |t| {
        metric_value(
            t,
            "sluice_shed_requests_total",
            &[("route", "chat"), ("priority", "batch")],
        ) == Some(shed.len() as f64)
    })
    .await;
    assert_eq!(
        metric_value(
            &text,
            "sluice_shed_requests_total",
            &[("route", "chat"), ("priority", "batch")]
        ),
        Some(shed.len() as f64),
        "{text}"
    );
    assert_eq!(
        metric_value(
            &text,
            "sluice_shed_requests_total",
            &[("route", "chat"), ("priority", "interactive")]
        ),
        Some(0.0),
        "{text}"
    );

    // Load stopped: the window empties, and after two holds (a half, then
    // the rest; each doubled, at most 8 s, if the load flapped) the level
    // is 0 again, with its event.
    let level_zero =
        |t: &str| metric_value(t, "sluice_shedding_level", &[("route", "chat")]) == Some(0.0);
    let text = harness::metrics_within(&sluice, Duration::from_secs(45), level_zero).await;
    assert!(level_zero(&text), "{text}");
    let (_, events) = admin.get("/v1/events").await;
    let last = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["source"] == "shedding")
        .cloned()
        .unwrap();
    assert_eq!(last["evidence"]["to"].as_f64(), Some(0.0), "{last}");
    assert_eq!(last["evidence"]["signals"][0]["breached"], false, "{last}");
    // And batch is served again.
    let again = send(reqwest::Client::new(), url, "batch").await.unwrap();
    assert_eq!(again.status, 200, "{again:?}");
}
