//! Rollouts on the real data plane: sessions stay on their version while the
//! canary's steps rise, a slow canary is rolled back on live traffic and its
//! sessions land on stable, and testers can force a version.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sluice_cli::{MockLlm, MockLlmOptions};

use crate::harness::{listener, start, Admin, TestConfig};

pub(crate) async fn mock(model: &str, ttft_ms: u64) -> MockLlm {
    MockLlm::start(MockLlmOptions {
        model: model.into(),
        ..MockLlmOptions::paced_ms(ttft_ms, 2, 2)
    })
    .await
    .unwrap()
}

pub(crate) fn yaml(stable: &MockLlm, canary: &MockLlm, steps: &str) -> String {
    TestConfig::http()
        .cluster_with("stable", "llm", [stable.addr()], "version: v1")
        .cluster_with("canary", "llm", [canary.addr()], "version: v2")
        .route_with(
            "chat",
            "stable: 100, canary: 0",
            "sticky: { header: x-session-id }, allow_version_header: true",
        )
        .section(
            "rollouts",
            format!(
                "\n  - {{ name: chat-v2, route: chat, stable: stable, canary: canary, steps: {steps}, \
                 hold: 1s, min_requests: 5, interval: 100ms, window: 2s, gates: {{ ttft_p95: 150ms }} }}"
            ),
        )
        .yaml()
}

/// Which model answered a streamed chat: "v1" or "v2".
pub(crate) async fn ask(client: &reqwest::Client, url: &str, headers: &[(&str, &str)]) -> String {
    let mut req = client
        .post(url)
        .json(&json!({"messages": [{"role": "user", "content": "hi"}], "stream": true}));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send().await.unwrap();
    assert_eq!(r.status(), 200);
    let body = r.text().await.unwrap();
    if body.contains("\"model\":\"v2\"") {
        "v2"
    } else {
        "v1"
    }
    .to_string()
}

/// One request per session, all at once; the version each session got.
async fn round(client: &reqwest::Client, url: &str, sessions: &[String]) -> Vec<String> {
    let asks = sessions
        .iter()
        .map(|s| async move { ask(client, url, &[("x-session-id", s)]).await });
    futures_util::future::join_all(asks).await
}

async fn rollout(admin: &Admin) -> Value {
    admin.get("/v1/rollouts/chat-v2").await.1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_keep_their_version_while_steps_rise_and_land_on_stable_after_rollback() {
    let stable = mock("v1", 10).await;
    let canary = mock("v2", 10).await;
    let sluice =
        start(&yaml(&stable, &canary, "[20, 40, 60, 100]").replace("hold: 1s", "hold: 3s"));
    let admin = Admin::new(&sluice);
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let client = reqwest::Client::new();
    let sessions: Vec<String> = (0..30).map(|i| format!("user-{i}")).collect();
    let mut history: HashMap<String, Vec<String>> = HashMap::new();

    // Healthy canary: drive traffic while the steps rise to 40%.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for (s, v) in sessions.iter().zip(round(&client, &url, &sessions).await) {
            history.entry(s.clone()).or_default().push(v);
        }
        let status = rollout(&admin).await;
        if status["weight"].as_u64().unwrap_or(0) >= 40 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "rollout did not reach 40%: {status}"
        );
    }
    // A session may move to the canary as its weight rises, never back.
    for (s, seen) in &history {
        let first_v2 = seen.iter().position(|v| v == "v2").unwrap_or(seen.len());
        assert!(
            seen[first_v2..].iter().all(|v| v == "v2"),
            "session {s} flipped back: {seen:?}"
        );
    }
    assert!(history
        .values()
        .any(|seen| seen.last().map(String::as_str) == Some("v2")));

    // The canary slows down: rolled back, and every session is on stable.
    canary.knobs().set_ttft(Duration::from_millis(400));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        round(&client, &url, &sessions).await;
        let status = rollout(&admin).await;
        if status["state"] == "rolled_back" {
            assert_eq!(status["weight"], 0);
            let events = status["events"].as_array().unwrap();
            let last = events.last().unwrap().to_string();
            assert!(
                last.contains("ttft_p95"),
                "rollback evidence names the gate: {last}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "not rolled back: {status}");
    }
    for s in &sessions {
        assert_eq!(
            ask(&client, &url, &[("x-session-id", s)]).await,
            "v1",
            "session {s}"
        );
    }
    // Testers can still reach the canary on purpose, by its version: the
    // rolled-back rollout has left the config, and `stable` / `canary`
    // name the clusters of a rollout that runs.
    assert_eq!(
        ask(&client, &url, &[("x-sluice-version", "v2")]).await,
        "v2"
    );
    assert_eq!(
        ask(&client, &url, &[("x-sluice-version", "v1")]).await,
        "v1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_canary_is_rolled_back_on_live_traffic() {
    let stable = mock("v1", 10).await;
    let canary = mock("v2", 400).await;
    let sluice = start(&yaml(&stable, &canary, "[50, 100]"));
    let admin = Admin::new(&sluice);
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));

    // Steady traffic from 8 workers until the rollout decides.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = Vec::new();
    for w in 0..8 {
        let (url, stop) = (url.clone(), stop.clone());
        workers.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && n < 2000 {
                ask(&client, &url, &[("x-session-id", &format!("w{w}-{n}"))]).await;
                n += 1;
            }
        }));
    }
    let started = Instant::now();
    let mut status = Value::Null;
    while started.elapsed() < Duration::from_secs(20) {
        status = rollout(&admin).await;
        if status["state"] == "rolled_back" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let decided = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    assert_eq!(status["state"], "rolled_back", "{status}");
    assert_eq!(status["weight"], 0);
    // Generous: the decision itself is measured in docs/BENCHMARKS.md.
    assert!(decided < Duration::from_secs(10), "{decided:?}");
    let (_, routes) = admin.get("/v1/routes").await;
    assert_eq!(routes[0]["split"], json!({"stable": 100, "canary": 0}));

    // The rolled-back rollout no longer holds the route: the next one is
    // taken at once, and the old one is listed as it finished until deleted.
    let next = json!({"name": "chat-v3", "route": "chat", "stable": "stable",
                      "canary": "canary", "steps": [50, 100], "hold": "1s",
                      "gates": {"ttft_p95": "150ms"}});
    let (status, body) = admin.post("/v1/rollouts", next.to_string()).await;
    assert_eq!(status, 201, "{body}");
    let (_, list) = admin.get("/v1/rollouts").await;
    assert_eq!(
        (&list[0]["name"], &list[0]["state"], &list[1]["name"]),
        (&json!("chat-v2"), &json!("rolled_back"), &json!("chat-v3")),
        "{list}"
    );
    let (status, _) = admin.delete("/v1/rollouts/chat-v2").await;
    assert_eq!(status, 200);
    assert_eq!(admin.get("/v1/rollouts/chat-v2").await.0, 404);
    assert_eq!(
        admin.get("/v1/rollouts").await.1.as_array().unwrap().len(),
        1
    );
}
