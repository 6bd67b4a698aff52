//! `compare.embeddings` with real models: llama.cpp serving SmolLM2 as the
//! primary and the shadow, and a third llama.cpp serving the same model's
//! embeddings. An identical shadow scores near 1; the same shadow cluster
//! moved to a model sampling at temperature 1.5 scores lower, its window
//! drifts from the baseline, and the drift event fires.

use std::time::Duration;

use serde_json::{json, Value};

use super::real::sample;
use crate::harness::{listener, metrics_within, Admin, TestConfig};
use crate::llama_cpp::LlamaServer;
use crate::support::{python, require};

const PROMPTS: [&str; 6] = [
    "Write a short poem about the sea.",
    "Name three colours and say why you like them.",
    "Tell me a story about a small robot.",
    "What should I cook for dinner tonight?",
    "Explain why the sky is blue.",
    "Describe a walk in a forest in autumn.",
];

fn config(primary: u16, shadow: u16, embedder: u16) -> TestConfig {
    let at = |port: u16| format!("127.0.0.1:{port}");
    super::head()
        .cluster("primary", "llm", [at(primary)])
        .cluster("shadow", "llm", [at(shadow)])
        .cluster("embedder", "llm", [at(embedder)])
        .route_with(
            "chat",
            "primary: 100",
            "mirror: { cluster: shadow, timeout: 60s, \
compare: { embeddings: { cluster: embedder, window: 6 } } }",
        )
}

async fn ask_all(url: &str) {
    for prompt in PROMPTS {
        let body = json!({"messages": [{"role": "user", "content": prompt}], "max_tokens": 32});
        let r = reqwest::Client::new()
            .post(url)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let _ = r.bytes().await;
    }
}

/// Mean similarity of the pairs scored between two metrics texts.
fn mean_between(before: &str, after: &str) -> f64 {
    let key = |s: &str| format!("sluice_mirror_embedding_similarity_{s}{{route=\"chat\"}} ");
    (sample(after, &key("sum")) - sample(before, &key("sum")))
        / (sample(after, &key("count")) - sample(before, &key("count")))
}

async fn scored(sluice: &sluice_proxy::Sluice, n: f64) -> String {
    metrics_within(sluice, Duration::from_secs(150), |m| {
        sample(
            m,
            "sluice_mirror_embedding_similarity_count{route=\"chat\"} ",
        ) >= n
    })
    .await
}

fn drift_events(events: &Value) -> Vec<Value> {
    events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["source"] == "mirror")
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identical_shadow_scores_one_and_a_hot_one_drifts_and_raises_the_event() {
    let Some(py) = python() else {
        require("the .venv python with openai and xllamacpp", false);
        return;
    };
    let (primary, cold, hot, embedder) = tokio::task::spawn_blocking(move || {
        (
            LlamaServer::start_with(&py, Some(0.0)),
            LlamaServer::start_with(&py, Some(0.0)),
            LlamaServer::start_with(&py, Some(1.5)),
            LlamaServer::start_embedder(&py),
        )
    })
    .await
    .unwrap();
    let sluice = config(primary.port, cold.port, embedder.port).start();
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let admin = Admin::new(&sluice);

    // The same model at temperature 0: the same answers, the same vectors.
    ask_all(&url).await;
    let baseline = scored(&sluice, 6.0).await;
    let identical = mean_between("", &baseline);
    assert!(identical > 0.99, "identical answers scored {identical}");
    assert_eq!(
        sample(
            &baseline,
            "sluice_mirror_embedding_requests_total{result=\"ok\",route=\"chat\"} "
        ),
        6.0
    );
    let (_, events) = admin.get("/v1/events").await;
    assert!(drift_events(&events).is_empty(), "{events}");

    // The shadow cluster now points at the model sampling at 1.5: the
    // policy is unchanged, so the baseline stays and the window drifts.
    let moved = config(primary.port, hot.port, embedder.port).yaml();
    let (status, body) = admin.put("/v1/config", moved).await;
    assert_eq!(status, 200, "{body}");
    ask_all(&url).await;
    let after = scored(&sluice, 12.0).await;
    let hot_mean = mean_between(&baseline, &after);
    let kl = sample(&after, "sluice_mirror_embedding_drift_kl{route=\"chat\"} ");
    eprintln!(
        "embedding similarity: identical {identical:.3}, temperature 1.5 {hot_mean:.3}; KL {kl:.3}"
    );
    assert!(hot_mean < identical - 0.02, "{hot_mean} vs {identical}");
    assert!(kl > 0.38, "KL {kl}");
    let (_, events) = admin.get("/v1/events").await;
    let drift = drift_events(&events);
    assert!(!drift.is_empty(), "{events}");
    assert_eq!(
        drift[0]["action"],
        "embedding drift on route chat (shadow shadow)"
    );
    // The first hot pair is already below 0.82: the event names it. It is
    // raised once, while the drift lasts.
    let why = drift[0]["errors"].as_array().unwrap();
    assert!(
        why.iter()
            .any(|w| w.as_str().unwrap().contains("is below 0.82")),
        "{why:?}"
    );
    assert_eq!(drift.len(), 1, "{drift:?}");
    drop((primary, cold, hot, embedder));
}

/// What the real embedder scores: the calibration of `similarity_min`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_embedder_scores_identical_above_reworded_above_off_topic() {
    let Some(py) = python() else {
        require("the .venv python with openai and xllamacpp", false);
        return;
    };
    let embedder = tokio::task::spawn_blocking(move || LlamaServer::start_embedder(&py))
        .await
        .unwrap();
    let texts = [
        "The sky is blue because air scatters blue sunlight more than red.",
        "Air scatters the blue part of sunlight most, which makes the sky look blue.",
        "I like to cook pasta with tomato sauce and fresh basil.",
    ];
    let r = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{}/v1/embeddings", embedder.port))
        .json(&json!({"input": texts}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let doc: Value = r.json().await.unwrap();
    let vectors: Vec<Vec<f32>> = doc["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| serde_json::from_value(d["embedding"].clone()).unwrap())
        .collect();
    let cosine = |a: usize, b: usize| sluice_filters::cosine(&vectors[a], &vectors[b]).unwrap();
    let (identical, reworded, off_topic) = (cosine(0, 0), cosine(0, 1), cosine(0, 2));
    eprintln!(
        "embedder: identical {identical:.3}, reworded {reworded:.3}, off-topic {off_topic:.3}"
    );
    assert!((identical - 1.0).abs() < 1e-6);
    assert!(
        reworded < identical && off_topic < reworded,
        "{reworded} {off_topic}"
    );
    drop(embedder);
}
