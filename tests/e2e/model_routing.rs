//! Routing by model: one listener sends `gpt-*` to one cluster and `llama-*`
//! to another (the model read from the body, or from `telemetry.model_header`),
//! and a split target's `rewrite.model` puts another model in the body it is
//! sent, every other byte as the client wrote it.

use std::time::Duration;

use serde_json::{json, Value};
use sluice_cli::{MockLlm, MockLlmOptions};

use crate::harness::{listener, TestConfig};

async fn recording_mock() -> MockLlm {
    MockLlm::start(MockLlmOptions {
        record: true,
        ..MockLlmOptions::paced_ms(1, 1, 2)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_models_on_one_listener_reach_two_clusters() {
    let gpt = recording_mock().await;
    let llama = recording_mock().await;
    let canary = recording_mock().await;
    let sluice = TestConfig::http()
        .cluster_with("gpt", "llm", [gpt.addr()], "version: v1")
        .cluster_with("llama", "llm", [llama.addr()], "version: v1")
        .cluster_with("canary", "llm", [canary.addr()], "version: v2")
        .route_with("gpt", "gpt: 100", "match: { model: \"gpt-*\" }")
        .route_with(
            "llama",
            "llama: 0, canary: 100",
            "match: { model: \"llama-*\" }, rewrite: { canary: { model: llama-ckpt-2 } }",
        )
        .route("rest", "llama: 100")
        .section("telemetry", "{ model_header: x-model }")
        .start();
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let client = reqwest::Client::new();
    let send = |body: String, header: Option<&'static str>| {
        let mut req = client
            .post(&url)
            .header("content-type", "application/json")
            .body(body);
        if let Some(m) = header {
            req = req.header("x-model", m);
        }
        async move {
            let r = req.send().await.unwrap();
            assert_eq!(r.status(), 200);
            r.json::<Value>().await.unwrap()
        }
    };
    let messages = json!([{"role": "user", "content": "hi"}]);

    let answer = send(
        json!({"model": "gpt-4o", "messages": messages}).to_string(),
        None,
    )
    .await;
    assert_eq!(answer["model"], "gpt-4o");
    let seen = gpt.wait_seen(1, Duration::from_secs(10)).await;
    assert_eq!(seen[0].model().as_deref(), Some("gpt-4o"));

    // The canary gets the checkpoint's name; the rest of the body as sent,
    // spacing included, and a content-length that fits it.
    let body = r#"{"model" : "llama-3.1-8b",  "messages": [{"role":"user","content":"hi"}]}"#;
    let answer = send(body.to_string(), None).await;
    assert_eq!(answer["model"], "llama-ckpt-2");
    let seen = canary.wait_seen(1, Duration::from_secs(10)).await;
    assert_eq!(
        std::str::from_utf8(&seen[0].body).unwrap(),
        r#"{"model" : "llama-ckpt-2",  "messages": [{"role":"user","content":"hi"}]}"#
    );
    assert_eq!(
        seen[0].header("content-length"),
        Some(seen[0].body.len().to_string().as_str())
    );

    // A body that names no model: the model header routes it, and the
    // rewrite adds the field.
    send(json!({"messages": messages}).to_string(), Some("llama-2")).await;
    let seen = canary.wait_seen(2, Duration::from_secs(10)).await;
    assert_eq!(seen[1].model().as_deref(), Some("llama-ckpt-2"));

    // No route's glob matches: the route without a model condition takes it.
    send(
        json!({"model": "mistral-7b", "messages": messages}).to_string(),
        None,
    )
    .await;
    let seen = llama.wait_seen(1, Duration::from_secs(10)).await;
    assert_eq!(seen[0].model().as_deref(), Some("mistral-7b"));
    assert_eq!(gpt.seen().len(), 1);
    assert_eq!(canary.seen().len(), 2);
}
