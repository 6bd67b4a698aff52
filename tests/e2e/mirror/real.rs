//! Real peers behind the mirror: llama.cpp servers with the real model as
//! primary and shadow, compared by answer text.

use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::{listener, metrics_when, Admin};
use crate::llama_cpp::LlamaServer;
use crate::support::{python, require};

const PROMPTS: [&str; 4] = [
    "Write a short poem about the sea.",
    "Name three colours and say why you like them.",
    "Tell me a story about a small robot.",
    "What should I cook for dinner tonight?",
];

/// The value of a sample whose line starts with `prefix` (name and labels).
pub(super) fn sample(metrics: &str, prefix: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

async fn chat(url: &str, prompt: &str) -> String {
    let body = json!({
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 24,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let r = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.text().await.unwrap()
}

/// Metrics once `compared` shadow answers have been compared (90 s at most:
/// the shadow generates after the primary, on the same two cores).
async fn compared(sluice: &sluice_proxy::Sluice, n: f64) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let text = metrics_when(sluice, |_| true).await;
        let done = sample(&text, "sluice_mirror_diff_compared_total{route=\"chat\"} ");
        if done >= n || std::time::Instant::now() > deadline {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_llama_cpp_shadow_at_another_temperature_differs_and_an_identical_one_does_not() {
    let Some(py) = python() else {
        require("the .venv python with openai and xllamacpp", false);
        return;
    };
    let (primary, hot, cold) = tokio::task::spawn_blocking(move || {
        (
            LlamaServer::start_with(&py, Some(0.0)),
            LlamaServer::start_with(&py, Some(1.5)),
            LlamaServer::start_with(&py, Some(0.0)),
        )
    })
    .await
    .unwrap();
    let port = |s: &LlamaServer| format!("127.0.0.1:{}", s.port);
    let sluice = super::head()
        .cluster("primary", "llm", [port(&primary)])
        .cluster("hot", "llm", [port(&hot)])
        .cluster("cold", "llm", [port(&cold)])
        .route_with(
            "chat",
            "primary: 100",
            "mirror: { cluster: hot, timeout: 60s, compare: { keep_text: true } }",
        )
        .start();
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));

    // A shadow sampling at 1.5 answers the same prompts differently.
    for prompt in PROMPTS {
        chat(&url, prompt).await;
    }
    let metrics = compared(&sluice, 4.0).await;
    let count = sample(
        &metrics,
        "sluice_mirror_diff_similarity_count{route=\"chat\"} ",
    );
    let sum = sample(
        &metrics,
        "sluice_mirror_diff_similarity_sum{route=\"chat\"} ",
    );
    assert_eq!(count, 4.0, "{metrics}");
    assert!(sum < count, "some similarity below 1: sum {sum} of {count}");
    let text_diffs = sample(
        &metrics,
        "sluice_mirror_diff_total{kind=\"text\",route=\"chat\"} ",
    );
    assert!(text_diffs >= 1.0, "{metrics}");
    let admin = Admin::new(&sluice);
    let (_, diffs) = admin.get("/v1/mirror/diffs").await;
    let list = diffs["diffs"].as_array().unwrap();
    assert_eq!(list.len() as f64, text_diffs, "{diffs}");
    let pair = &list[0];
    assert_eq!(pair["kinds"], json!(["text"]));
    assert!(pair["similarity"].as_f64().unwrap() < 1.0);
    assert_eq!(pair["primary"]["cluster"], "primary");
    assert_eq!(pair["shadow"]["cluster"], "hot");
    // keep_text: both answers are there to read, and they differ.
    let (p, s) = (&pair["primary"]["text"], &pair["shadow"]["text"]);
    assert!(p.is_string() && s.is_string() && p != s, "{pair}");
    assert!(pair["shadow"]["output_tokens"].as_u64().unwrap() > 0);

    // The same model at the same temperature 0, with a noise copy to the
    // primary: nothing differs beyond the noise floor.
    let (status, body) = admin
        .put(
            "/v1/routes/chat/mirror",
            json!({"cluster": "cold", "timeout": "60s", "compare": {"noise_copies": 1}})
                .to_string(),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    for prompt in PROMPTS {
        chat(&url, prompt).await;
    }
    let metrics = compared(&sluice, 8.0).await;
    assert_eq!(
        sample(
            &metrics,
            "sluice_mirror_diff_compared_total{route=\"chat\"} "
        ),
        8.0
    );
    assert_eq!(
        sample(
            &metrics,
            "sluice_mirror_noise_requests_total{result=\"ok\",route=\"chat\"} "
        ),
        4.0,
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            "sluice_mirror_diff_total{kind=\"text\",route=\"chat\"} "
        ),
        text_diffs,
        "no new difference beyond the noise floor"
    );
    let (_, after) = admin.get("/v1/mirror/diffs").await;
    assert_eq!(after["total"], diffs["total"]);
    let _: Value = after;
    drop((primary, hot, cold));
}
