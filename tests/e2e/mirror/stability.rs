//! The mirror's answer-level gates with real models: llama.cpp serving
//! SmolLM2 as stable and canary, and a llama.cpp in embedding mode. A
//! rollout gated on `embedding_similarity_p10_min` rolls back a canary
//! whose prompt template drifts and promotes an identical one; answer
//! stability (`mirror.stability`) sees four answers at temperature 0 agree
//! and four at 1.2 spread.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::{listener, metric_value, metrics_within, Admin, TestConfig};
use crate::llama_cpp::LlamaServer;
use crate::support::{python, require};

const PROMPTS: [&str; 4] = [
    "Explain why the sky is blue.",
    "Name three colours and say why you like them.",
    "What should I cook for dinner tonight?",
    "Describe a walk in a forest in autumn.",
];

/// The drifted canary's prompt template: this as its system turn and
/// after each user message.
const DRIFT: &str = "Answer only about football.";

fn at(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

async fn ask(client: &reqwest::Client, url: &str, prompt: &str, headers: &[(&str, &str)]) {
    let body = json!({"messages": [{"role": "user", "content": prompt}], "max_tokens": 24});
    let mut req = client.post(url).json(&body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send().await.unwrap();
    assert_eq!(r.status(), 200);
    let _ = r.bytes().await;
}

/// Stable and canary on route `chat` (canary at 0), the route mirroring
/// to the canary with its answers embedded, and a rollout gated on the
/// p10 of the last 4 pairs' similarity only.
fn gated(stable: u16, canary: u16, embedder: u16) -> TestConfig {
    super::head()
        .cluster_with("stable", "llm", [at(stable)], "version: v1")
        .cluster_with("canary", "llm", [at(canary)], "version: v2")
        .cluster("embedder", "llm", [at(embedder)])
        .route_with(
            "chat",
            "stable: 100, canary: 0",
            "mirror: { cluster: canary, timeout: 60s, \
             compare: { embeddings: { cluster: embedder, window: 4 } } }",
        )
        .section(
            "rollouts",
            "\n  - { name: chat-v2, route: chat, stable: stable, canary: canary, steps: [1, 100], \
             hold: 1s, min_requests: 3, interval: 100ms, \
             gates: { embedding_similarity_p10_min: 0.98 } }",
        )
}

/// Sends the prompts until the rollout ends (or 240 s pass); its status.
async fn until_decided(sluice: &sluice_proxy::Sluice) -> Value {
    let url = format!("http://{}/v1/chat/completions", listener(sluice, "public"));
    let admin = Admin::new(sluice);
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut status = Value::Null;
    for prompt in PROMPTS.iter().cycle() {
        status = admin.get("/v1/rollouts/chat-v2").await.1;
        if ["rolled_back", "promoted"].contains(&status["state"].as_str().unwrap_or(""))
            || Instant::now() > deadline
        {
            break;
        }
        ask(&client, &url, prompt, &[]).await;
        // The copy and its embedding follow the answer: let them land.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    status
}

fn p10_evidence(status: &Value) -> Vec<Value> {
    status["events"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["evidence"].as_array().cloned().unwrap_or_default())
        .filter(|g| g["gate"] == "embedding_similarity_p10_min")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_gated_on_embedding_similarity_rolls_back_a_drifted_canary_and_promotes_an_identical_one(
) {
    let Some(py) = python() else {
        require("the .venv python with openai and xllamacpp", false);
        return;
    };
    let (stable, drifted, identical, embedder) = tokio::task::spawn_blocking(move || {
        (
            LlamaServer::start_with(&py, Some(0.0)),
            LlamaServer::start_with_system(&py, DRIFT),
            LlamaServer::start_with(&py, Some(0.0)),
            LlamaServer::start_embedder(&py),
        )
    })
    .await
    .unwrap();

    let sluice = gated(stable.port, drifted.port, embedder.port).start();
    let status = until_decided(&sluice).await;
    assert_eq!(status["state"], "rolled_back", "{status}");
    assert_eq!(status["weight"], 0);
    let evidence = p10_evidence(&status);
    let breach = evidence.last().unwrap();
    let p10 = breach["value"].as_f64().unwrap();
    assert!(p10 < 0.98, "{breach}");
    assert!(breach["samples"].as_u64().unwrap() >= 3, "{breach}");
    drop(sluice);

    let sluice = gated(stable.port, identical.port, embedder.port).start();
    let status = until_decided(&sluice).await;
    assert_eq!(status["state"], "promoted", "{status}");
    assert_eq!(status["weight"], 100);
    // The step was taken on a judged, passing p10.
    let passed = p10_evidence(&status);
    let identical_p10 = passed
        .iter()
        .filter(|g| g["ok"] == true)
        .filter_map(|g| g["value"].as_f64())
        .fold(f64::NAN, f64::min);
    assert!(identical_p10 >= 0.98, "{status}");
    eprintln!(
        "embedding_similarity_p10_min 0.98: drifted canary p10 {p10:.3} (rolled back), \
         identical canary p10 {identical_p10:.3} (promoted)"
    );
    drop((stable, drifted, identical, embedder));
}

/// Two routes on one primary, told apart by a header, each mirroring four
/// copies to its own shadow: the same model at temperature 0 and at 1.2.
fn stability(primary: u16, hot: u16, embedder: u16) -> TestConfig {
    let mirror = |shadow: &str| {
        format!(
            "match: {{ headers: {{ x-shadow: {shadow} }} }}, mirror: {{ cluster: {shadow}, \
             copies: 4, stability: true, timeout: 120s, \
             compare: {{ embeddings: {{ cluster: embedder, window: 8 }} }} }}"
        )
    };
    super::head()
        .cluster("primary", "llm", [at(primary)])
        .cluster("cold", "llm", [at(primary)])
        .cluster("hot", "llm", [at(hot)])
        .cluster("embedder", "llm", [at(embedder)])
        .route_with("chat-cold", "primary: 100", &mirror("cold"))
        .route_with("chat-hot", "primary: 100", &mirror("hot"))
}

/// Mean dispersion and mean pairwise similarity of a route's prompts.
fn stability_means(metrics: &str, route: &str) -> (f64, f64, f64) {
    let labels = [("route", route)];
    let value = |name: &str| metric_value(metrics, name, &labels).unwrap_or(0.0);
    let prompts = value("sluice_mirror_answer_dispersion_count");
    (
        value("sluice_mirror_answer_dispersion_sum") / prompts,
        value("sluice_mirror_answer_pairwise_similarity_sum") / prompts,
        prompts,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_answers_at_temperature_0_agree_and_four_at_1_2_spread() {
    let Some(py) = python() else {
        require("the .venv python with openai and xllamacpp", false);
        return;
    };
    let (primary, hot, embedder) = tokio::task::spawn_blocking(move || {
        (
            LlamaServer::start_with(&py, Some(0.0)),
            LlamaServer::start_with(&py, Some(1.2)),
            LlamaServer::start_embedder(&py),
        )
    })
    .await
    .unwrap();
    let sluice = stability(primary.port, hot.port, embedder.port).start();
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let client = reqwest::Client::new();
    for prompt in &PROMPTS[..3] {
        for shadow in ["cold", "hot"] {
            ask(&client, &url, prompt, &[("x-shadow", shadow)]).await;
        }
    }
    let metrics = metrics_within(&sluice, Duration::from_secs(240), |m| {
        ["chat-cold", "chat-hot"].iter().all(|r| {
            metric_value(m, "sluice_mirror_answer_dispersion_count", &[("route", r)])
                .is_some_and(|n| n >= 3.0)
        })
    })
    .await;
    let (cold, cold_pairwise, cold_prompts) = stability_means(&metrics, "chat-cold");
    let (hot, hot_pairwise, hot_prompts) = stability_means(&metrics, "chat-hot");
    eprintln!(
        "answer dispersion over {cold_prompts} and {hot_prompts} prompts of 4 answers: \
         temperature 0 {cold:.6} (pairwise {cold_pairwise:.3}), \
         temperature 1.2 {hot:.6} (pairwise {hot_pairwise:.3})"
    );
    assert_eq!((cold_prompts, hot_prompts), (3.0, 3.0), "{metrics}");
    // The histograms carry the shadow cluster and its version.
    assert!(
        metric_value(
            &metrics,
            "sluice_mirror_answer_dispersion_count",
            &[("route", "chat-hot"), ("cluster", "hot")]
        )
        .is_some(),
        "{metrics}"
    );
    assert!(cold < 1e-4, "temperature 0 dispersion {cold}");
    assert!(
        cold_pairwise > 0.99,
        "temperature 0 pairwise {cold_pairwise}"
    );
    assert!(hot > 10.0 * cold.max(1e-4), "{hot} vs {cold}");
    assert!(hot_pairwise < cold_pairwise - 0.02, "{hot_pairwise}");
    drop((primary, hot, embedder));
}
