//! Prompt-diversity coverage per rollout step, with the real embedder
//! (llama.cpp in embedding mode on SmolLM2) and mock stable and canary
//! models: prompts from six topics are embedded and clustered, each step
//! counts the clusters the canary served against all those seen, and a
//! rollout gated on `min_coverage: 100%` (judged once 24 prompts were
//! embedded) holds at its 10% step until the canary has served every
//! topic, then steps on. Sessions are sticky by a
//! numbered header, so which request the canary serves is the same at
//! every run.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sluice_cli::{MockLlm, MockLlmOptions};

use crate::harness::{listener, metric_value, Admin, TestConfig};
use crate::llama_cpp::LlamaServer;
use crate::support::{python, require};

/// One prompt per topic (cooking, astronomy, programming, football,
/// finance, medicine). With this small embedder, rewordings within a topic
/// score 0.79–1 and prompts across topics 0.71–0.90, so reworded variants
/// would not cluster by topic; these six are at most 0.84 apart, and the
/// test clusters at 0.9: six clusters, one per topic.
const TOPICS: [&str; 6] = [
    "How long should I boil pasta for it to be al dente?",
    "Why does Mars look red in the night sky?",
    "How do I reverse a linked list in Python?",
    "Who won the last football World Cup?",
    "How do interest rates affect mortgage payments?",
    "What are the symptoms of the flu?",
];

fn config(stable: &MockLlm, canary: &MockLlm, embedder: u16) -> TestConfig {
    super::head()
        .cluster_with("stable", "llm", [stable.addr()], "version: v1")
        .cluster_with("canary", "llm", [canary.addr()], "version: v2")
        .cluster("embedder", "llm", [format!("127.0.0.1:{embedder}")])
        .route_with(
            "chat",
            "stable: 100, canary: 0",
            "sticky: { header: x-session-id }, \
             mirror: { cluster: canary, percent: 0, timeout: 30s, \
             compare: { embeddings: { cluster: embedder, \
             coverage: { sample: 1, max_per_second: 1000, similarity: 0.9 } } } }",
        )
        .section(
            "rollouts",
            "\n  - { name: chat-v2, route: chat, stable: stable, canary: canary, \
             steps: [10, 50, 100], hold: 1s, min_requests: 24, interval: 100ms, \
             gates: { min_coverage: 100% } }",
        )
}

struct Driver {
    url: String,
    client: reqwest::Client,
    admin: Admin,
    metrics_url: String,
    sent: u64,
}

impl Driver {
    /// One round: each topic once, each request its own session.
    async fn round(&mut self) {
        for prompt in TOPICS {
            self.sent += 1;
            let body = json!({"model": "m", "messages": [{"role": "user", "content": prompt}]});
            let r = self
                .client
                .post(&self.url)
                .header("x-session-id", format!("s-{}", self.sent))
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            let _ = r.bytes().await;
        }
    }

    /// Waits until every prompt sent is embedded (20 s at most).
    async fn embedded(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = self.admin_metrics().await;
            let n = metric_value(
                &text,
                "sluice_mirror_coverage_prompts_total",
                &[("route", "chat"), ("result", "embedded")],
            )
            .unwrap_or(0.0);
            if n as u64 >= self.sent || Instant::now() > deadline {
                assert_eq!(n as u64, self.sent, "prompts embedded: {text}");
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn admin_metrics(&self) -> String {
        self.client
            .get(&self.metrics_url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    async fn status(&self) -> Value {
        self.admin.get("/v1/rollouts/chat-v2").await.1
    }
}

fn percent(coverage: &Value) -> f64 {
    coverage["percent"].as_f64().unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coverage_rises_with_the_canary_weight_and_min_coverage_holds_a_step_until_met() {
    let Some(py) = python() else {
        require("the .venv python with xllamacpp", false);
        return;
    };
    let embedder = tokio::task::spawn_blocking(move || LlamaServer::start_embedder(&py))
        .await
        .unwrap();
    let stable = MockLlm::start(MockLlmOptions::paced_ms(1, 1, 3))
        .await
        .unwrap();
    let canary = MockLlm::start(MockLlmOptions::paced_ms(1, 1, 3))
        .await
        .unwrap();
    let sluice = config(&stable, &canary, embedder.port).start();
    let mut d = Driver {
        url: format!("http://{}/v1/chat/completions", listener(&sluice, "public")),
        client: reqwest::Client::new(),
        admin: Admin::new(&sluice),
        metrics_url: format!("http://{}/metrics", sluice.admin_addr),
        sent: 0,
    };
    // The rollout starts at its first evaluation: step 1, canary 10%.
    let deadline = Instant::now() + Duration::from_secs(10);
    while d.status().await["step"] != 1 {
        assert!(Instant::now() < deadline, "{}", d.status().await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Four rounds at 10%, then past the hold: the canary has not served
    // every topic, so the step holds (not a breach: nothing rolls back).
    for _ in 0..4 {
        d.round().await;
    }
    d.embedded().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let held = d.status().await;
    assert_eq!(held["state"], "progressing", "{held}");
    assert_eq!(held["step"], 1, "{held}");
    let at_10 = held["coverage"].clone();
    assert_eq!(at_10["clusters_seen"], 6, "{held}");
    assert!(percent(&at_10) < 100.0, "{held}");
    let gate = &held["gates"]["min_coverage"];
    assert_eq!(gate["ok"], Value::Null, "{held}");
    assert_eq!(gate["value"].as_f64(), at_10["percent"].as_f64(), "{held}");
    assert_eq!(held["breaches"], 0, "{held}");

    // More rounds at 10% until the canary has served all six: then it
    // steps to 50%.
    let sent_at_10 = loop {
        let status = d.status().await;
        if status["step"] == 2 {
            break d.sent;
        }
        assert!(d.sent < 600, "never met: {status}");
        d.round().await;
        d.embedded().await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let status = d.status().await;
    let step_1 = &status["step_history"][0];
    assert_eq!(step_1["weight"], 10, "{status}");
    assert_eq!(step_1["coverage"]["percent"], 100.0, "{status}");

    // The same four rounds at 50%: more of the prompt space than at 10%.
    for _ in 0..4 {
        d.round().await;
    }
    d.embedded().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let at_50 = d.status().await;
    let at_50 = if at_50["step"] == 2 {
        at_50["coverage"].clone()
    } else {
        at_50["step_history"][1]["coverage"].clone()
    };
    assert!(percent(&at_50) > percent(&at_10), "{at_50} vs {at_10}");

    // And on to 100%.
    let deadline = Instant::now() + Duration::from_secs(20);
    let end = loop {
        let status = d.status().await;
        if status["state"] != "progressing" || Instant::now() > deadline {
            break status;
        }
        d.round().await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(end["state"], "promoted", "{end}");
    let metrics = d.admin_metrics().await;
    assert!(
        metric_value(
            &metrics,
            "sluice_rollout_coverage_ratio",
            &[("rollout", "chat-v2")]
        )
        .is_some(),
        "{metrics}"
    );
    eprintln!(
        "coverage after 24 requests: {:.1}% at canary 10% ({} of {} clusters), \
         {:.1}% at 50% ({} of {}); min_coverage 100% held step 1 until request {sent_at_10}",
        percent(&at_10),
        at_10["canary_clusters"],
        at_10["clusters_seen"],
        percent(&at_50),
        at_50["canary_clusters"],
        at_50["clusters_seen"],
    );
    for step in end["step_history"].as_array().unwrap() {
        eprintln!(
            "step {} weight {}%: {} canary requests in the window, error rate {}, p99 {} ms, coverage {}%",
            step["step"],
            step["weight"],
            step["requests"],
            step["error_rate"],
            step["latency_p99_ms"],
            step["coverage"]["percent"]
        );
    }
    drop((sluice, embedder));
}
