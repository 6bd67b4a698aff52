//! The price table on live traffic: streamed answers priced into
//! `sluice_cost_usd_total` by their cluster's `cost:`, to the figure the
//! mock's own `usage` gives; and a canary whose tokens cost more than
//! `cost_per_1k_max` rolled back by that gate.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sluice_cli::{MockLlm, MockLlmOptions};

use crate::harness::{listener, metric_value, metrics_when, start, Admin, TestConfig};

/// Five words: the mock counts a prompt's words as its input tokens.
const PROMPT: &str = "one two three four five";
/// Output tokens per answer.
const TOKENS: u32 = 12;

async fn mock(model: &str) -> MockLlm {
    MockLlm::start(MockLlmOptions {
        model: model.into(),
        ..MockLlmOptions::paced_ms(2, 1, TOKENS)
    })
    .await
    .unwrap()
}

/// `cost:` with one per-token price, for model `m`.
fn price(input_per_1k: f64, output_per_1k: f64) -> String {
    format!(
        "cost: {{ models: {{ m: {{ input_per_1k: {input_per_1k}, output_per_1k: {output_per_1k} }} }} }}"
    )
}

/// One streamed chat with usage asked for; the (input, output) tokens the
/// model server reported in its final chunk.
async fn chat(client: &reqwest::Client, url: &str, model: &str) -> (u64, u64) {
    let body = json!({
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let r = client.post(url).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    let usage = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find_map(|v| v.get("usage").filter(|u| u.is_object()).cloned())
        .unwrap_or_else(|| panic!("no usage in the stream:\n{text}"));
    let n = |key: &str| usage[key].as_u64().unwrap();
    (n("prompt_tokens"), n("completion_tokens"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_tokens_are_priced_into_the_cost_counter() {
    let llm = mock("mock-llm").await;
    let yaml = TestConfig::http()
        .cluster_with(
            "llm",
            "llm",
            [llm.addr()],
            &format!("version: v1, {}", price(0.5, 1.5)),
        )
        .route("chat", "llm: 100")
        .yaml();
    let sluice = start(&yaml);
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let client = reqwest::Client::new();

    // A model the table lacks costs nothing.
    chat(&client, &url, "other").await;
    let mut want = 0.0;
    for _ in 0..10 {
        let (input, output) = chat(&client, &url, "m").await;
        assert_eq!((input, output), (5, u64::from(TOKENS)));
        want += (input as f64 * 0.5 + output as f64 * 1.5) / 1000.0;
    }
    let labels = [
        ("route", "chat"),
        ("cluster", "llm"),
        ("version", "v1"),
        ("model", "m"),
    ];
    let text = metrics_when(&sluice, |t| {
        metric_value(t, "sluice_requests_total", &[("route", "chat")]) == Some(11.0)
    })
    .await;
    let got = metric_value(&text, "sluice_cost_usd_total", &labels).unwrap();
    // 10 × (5 × 0.5 + 12 × 1.5) / 1000 = $0.205.
    assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    assert!((got - 0.205).abs() < 1e-12, "{got}");
    assert_eq!(
        metric_value(&text, "sluice_cost_tokens_total", &labels),
        Some(10.0 * 17.0)
    );
    for family in ["sluice_cost_usd_total", "sluice_cost_tokens_total"] {
        assert_eq!(metric_value(&text, family, &[("model", "other")]), None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_above_cost_per_1k_max_is_rolled_back() {
    let stable = mock("v1").await;
    let canary = mock("v2").await;
    // The same answers, priced 20 times higher on the canary: $0.0241 per
    // 1k tokens, over the $0.012 bound (stable's $0.0012 is under it).
    let yaml = TestConfig::http()
        .cluster_with(
            "stable",
            "llm",
            [stable.addr()],
            &format!("version: v1, {}", price(0.0005, 0.0015)),
        )
        .cluster_with(
            "canary",
            "llm",
            [canary.addr()],
            &format!("version: v2, {}", price(0.01, 0.03)),
        )
        .route("chat", "stable: 100, canary: 0")
        .section(
            "rollouts",
            "\n  - { name: chat-v2, route: chat, stable: stable, canary: canary, steps: [50, 100], \
             hold: 30s, min_requests: 5, interval: 100ms, window: 2s, \
             gates: { cost_per_1k_max: $0.012 } }",
        )
        .yaml();
    let sluice = start(&yaml);
    let admin = Admin::new(&sluice);
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let client = reqwest::Client::new();

    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        chat(&client, &url, "m").await;
        let (_, status) = admin.get("/v1/rollouts/chat-v2").await;
        if status["state"] == "rolled_back" {
            break status;
        }
        assert!(Instant::now() < deadline, "not rolled back: {status}");
    };
    assert_eq!(status["weight"], 0);
    let events = status["events"].as_array().unwrap();
    let evidence = &events.last().unwrap()["evidence"][0];
    assert_eq!(
        (&evidence["gate"], &evidence["unit"], &evidence["bound"]),
        (&json!("cost_per_1k_max"), &json!("usd"), &json!(0.012)),
        "{status}"
    );
    // Each canary answer: (5 × 0.01 + 12 × 0.03) / 1000 = $0.00041 for 17 tokens.
    let value = evidence["value"].as_f64().unwrap();
    assert!((value - 0.41 / 17.0).abs() < 1e-12, "{value}");
    assert!(evidence["samples"].as_u64().unwrap() >= 5, "{evidence}");
    let reason = events.last().unwrap()["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("cost_per_1k_max $0.024118 > $0.012 ("),
        "{reason}"
    );
    let (_, routes) = admin.get("/v1/routes").await;
    assert_eq!(routes[0]["split"], json!({"stable": 100, "canary": 0}));
}
