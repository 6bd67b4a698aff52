//! `mirror.perturb`: shadow copies carry a reworded prompt and say so, the
//! primary and the noise copies never do, and the perturbed answers feed the
//! robustness score, apart from the diffs. With the real model the score
//! falls as the rate rises.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};

use super::real::sample;
use super::{at_once, copies, drive, shadow};
use crate::harness::{listener, metrics_when, metrics_within, Admin};
use crate::llama_cpp::LlamaServer;
use crate::support::{python, require};

const PROMPT: &str =
    "Explain the difference between TCP and UDP, with examples of protocols, ports, latency and loss.";

fn user_text(body: &[u8]) -> String {
    let doc: Value = serde_json::from_slice(body).unwrap();
    doc["messages"][0]["content"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_copies_carry_a_perturbed_prompt_and_the_primary_and_noise_copies_do_not() {
    let primary = shadow(at_once()).await;
    let shadow = shadow(at_once()).await;
    let sluice = super::head()
        .cluster("primary", "llm", [primary.addr()])
        .cluster("shadow", "llm", [shadow.addr()])
        .route_with(
            "chat",
            "primary: 100",
            "mirror: { cluster: shadow, copies: 2, max_in_flight: 1000, \
perturb: { rate: 0.5, seed: 3 }, compare: { noise_copies: 1 } }",
        )
        .start();
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let body = json!({"model": "m", "messages": [{"role": "user", "content": PROMPT}]});
    let statuses = drive(
        &url,
        5,
        1,
        |i| vec![("x-request-id", format!("req-{i}"))],
        Bytes::from(body.to_string()),
    )
    .await;
    assert_eq!(statuses, vec![200; 5]);

    // The shadow: ten copies, each marked with the rate, five of the nine
    // eligible words masked, copy 1 and copy 2 of a request masked apart.
    let seen = copies(&shadow, 10).await;
    assert_eq!(seen.len(), 10);
    let mut by_copy = std::collections::BTreeMap::new();
    for s in &seen {
        assert_eq!(s.header("x-sluice-perturbed"), Some("0.5"));
        let text = user_text(&s.body);
        assert_eq!(text.matches("[MASK]").count(), 5, "{text}");
        by_copy
            .entry(s.header("x-sluice-shadow").unwrap().to_string())
            .or_insert_with(std::collections::BTreeSet::new)
            .insert(text);
    }
    // The same request body and copy number give the same words, every time.
    assert_eq!(by_copy.len(), 2);
    assert!(
        by_copy.values().all(|texts| texts.len() == 1),
        "{by_copy:?}"
    );
    assert_ne!(by_copy["1"], by_copy["2"]);

    // The primary's cluster: five client requests and five noise copies,
    // all with the prompt as the client wrote it.
    let seen = copies(&primary, 10).await;
    assert_eq!(seen.len(), 10);
    for s in &seen {
        assert_eq!(user_text(&s.body), PROMPT);
        assert_eq!(s.header("x-sluice-perturbed"), None);
    }
    assert_eq!(
        seen.iter()
            .filter(|s| s.header("x-sluice-shadow") == Some("noise"))
            .count(),
        5
    );

    // Perturbed answers are compared apart: the robustness score, not diffs.
    let metrics = metrics_within(&sluice, Duration::from_secs(30), |m| {
        sample(
            m,
            "sluice_mirror_perturbed_similarity_count{route=\"chat\"} ",
        ) >= 10.0
    })
    .await;
    assert_eq!(
        sample(
            &metrics,
            "sluice_mirror_noise_similarity_count{route=\"chat\"} "
        ),
        5.0,
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            "sluice_mirror_diff_compared_total{route=\"chat\"} "
        ),
        0.0
    );
    let score = sample(&metrics, "sluice_mirror_robustness{route=\"chat\"} ");
    assert!(score > 0.0 && score <= 1.0, "{score}");
}

/// Prompts of 9 to 12 eligible words: rate 0.15 masks one or two, 0.5 masks
/// five or six.
const PROMPTS: [&str; 6] = [
    "Explain in two sentences why the sky appears blue during the day and red at sunset.",
    "Describe how a bicycle gear system helps riders climb steep hills with less effort.",
    "List three healthy breakfast ideas that take under ten minutes to prepare at home.",
    "Summarise the main causes of the French Revolution for a curious high school student.",
    "Give practical advice for keeping indoor houseplants alive during a cold dark winter.",
    "Write a friendly email inviting colleagues to a Friday afternoon team lunch downtown.",
];

async fn ask(url: &str, prompt: &str) {
    let body = json!({
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 24,
    });
    let r = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let _ = r.bytes().await;
}

/// (mean perturbed similarity, mean noise similarity) of the answers
/// compared since `before` (the metrics text read before the phase).
fn phase_means(before: &str, after: &str) -> (f64, f64) {
    let delta = |name: &str| {
        let key = format!("{name}{{route=\"chat\"}} ");
        sample(after, &key) - sample(before, &key)
    };
    let perturbed = delta("sluice_mirror_perturbed_similarity_sum")
        / delta("sluice_mirror_perturbed_similarity_count");
    let noise =
        delta("sluice_mirror_noise_similarity_sum") / delta("sluice_mirror_noise_similarity_count");
    (perturbed, noise)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_llama_cpp_the_robustness_score_falls_as_the_perturbation_rate_rises() {
    let Some(py) = python() else {
        require("the .venv python with openai and xllamacpp", false);
        return;
    };
    // The same model at temperature 0 serves primary and shadow, so what
    // moves an answer is the perturbation, not the model.
    let (primary, same) = tokio::task::spawn_blocking(move || {
        (
            LlamaServer::start_with(&py, Some(0.0)),
            LlamaServer::start_with(&py, Some(0.0)),
        )
    })
    .await
    .unwrap();
    let port = |s: &LlamaServer| format!("127.0.0.1:{}", s.port);
    let sluice = super::head()
        .cluster("primary", "llm", [port(&primary)])
        .cluster("same", "llm", [port(&same)])
        .route("chat", "primary: 100")
        .start();
    let url = format!("http://{}/v1/chat/completions", listener(&sluice, "public"));
    let admin = Admin::new(&sluice);
    let mut means = Vec::new();
    for (phase, rate) in [0.15, 0.5].into_iter().enumerate() {
        let policy = json!({"cluster": "same", "timeout": "60s",
            "perturb": {"rate": rate, "seed": 11}, "compare": {"noise_copies": 1}});
        let (status, body) = admin
            .put("/v1/routes/chat/mirror", policy.to_string())
            .await;
        assert_eq!(status, 200, "{body}");
        let before = metrics_when(&sluice, |_| true).await;
        for prompt in PROMPTS {
            ask(&url, prompt).await;
        }
        let want = (6 * (phase + 1)) as f64;
        let after = metrics_within(&sluice, Duration::from_secs(120), |m| {
            sample(
                m,
                "sluice_mirror_perturbed_similarity_count{route=\"chat\"} ",
            ) >= want
                && sample(m, "sluice_mirror_noise_similarity_count{route=\"chat\"} ") >= want
        })
        .await;
        let (perturbed, noise) = phase_means(&before, &after);
        eprintln!(
            "rate {rate}: perturbed similarity {perturbed:.3}, noise {noise:.3}, robustness {:.3}",
            (perturbed / noise).min(1.0)
        );
        means.push((perturbed, noise));
    }
    let (low, high) = (means[0], means[1]);
    // Asking the same model again at temperature 0 gives the same answer.
    assert!(low.1 > 0.95 && high.1 > 0.95, "{means:?}");
    // A reworded prompt moves the answer, and more words reworded move it more.
    assert!(low.0 < low.1, "{means:?}");
    assert!(high.0 < low.0, "{means:?}");
    drop((primary, same));
}
