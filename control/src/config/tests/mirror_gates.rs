//! `mirror.stability` and the rollout gates that read a route's mirror
//! (`embedding_similarity_p10_min`, `embedding_drift_kl_max`,
//! `answer_dispersion_max`): what they need, with full error texts.

use super::super::*;

const BASE: &str = r#"
listeners:
  - { name: public, listen: 127.0.0.1:8080, protocol: http }
clusters:
  - { name: llm-stable, kind: llm, version: v1, endpoints: [127.0.0.1:8000] }
  - { name: llm-canary, kind: llm, version: v2, endpoints: [127.0.0.1:8001] }
  - { name: embedder, kind: llm, endpoints: [127.0.0.1:8002] }
  - { name: search, kind: http, endpoints: [127.0.0.1:8003] }
routes:
  - name: chat
    listener: public
    split: { llm-stable: 100, llm-canary: 0 }
"#;

/// The route `chat` mirroring with `mirror` (a flow map, or nothing), and
/// one rollout on it with `gates` and `extra` fields.
fn config(mirror: &str, gates: &str, extra: &str) -> String {
    let mirror = if mirror.is_empty() {
        String::new()
    } else {
        format!("    mirror: {mirror}\n")
    };
    format!(
        "{BASE}{mirror}rollouts:\n  - {{ name: chat-v2, route: chat, stable: llm-stable, \
         canary: llm-canary, min_requests: 5, gates: {{ {gates} }}{extra} }}\n"
    )
}

const EMBEDDING: &str = "{ cluster: llm-canary, copies: 2, stability: true, \
compare: { embeddings: { cluster: embedder, window: 10 } } }";

const ALL_GATES: &str = "embedding_similarity_p10_min: 0.9, embedding_drift_kl_max: 0.38, \
answer_dispersion_max: 0.002";

fn errors_in(text: &str) -> Vec<String> {
    match Config::from_yaml(text) {
        Ok(_) => panic!("config unexpectedly valid:\n{text}"),
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn the_mirror_gates_read_a_route_that_embeds_its_canary_answers() {
    let c = Config::from_yaml(&config(EMBEDDING, ALL_GATES, "")).unwrap();
    assert!(c.routes[0].mirror.as_ref().unwrap().stability);
    assert_eq!(
        c.rollouts[0].gates.bounds(),
        vec![
            (Gate::EmbeddingSimilarityP10Min, 0.9),
            (Gate::EmbeddingDriftKlMax, 0.38),
            (Gate::AnswerDispersionMax, 0.002),
        ]
    );
    // Stability is off unless asked for.
    let plain = EMBEDDING.replace("stability: true, ", "");
    let c = Config::from_yaml(&config(&plain, "embedding_drift_kl_max: 0.5", "")).unwrap();
    assert!(!c.routes[0].mirror.as_ref().unwrap().stability);
}

#[test]
fn a_mirror_gate_without_compare_embeddings_names_the_route() {
    assert_eq!(
        errors_in(&config("", ALL_GATES, "")),
        [
            "rollouts[0].gates.embedding_similarity_p10_min: needs mirror.compare.embeddings on route `chat`",
            "rollouts[0].gates.embedding_drift_kl_max: needs mirror.compare.embeddings on route `chat`",
            "rollouts[0].gates.answer_dispersion_max: needs mirror.compare.embeddings on route `chat`",
        ]
    );
    assert_eq!(
        errors_in(&config(
            "{ cluster: llm-canary }",
            "embedding_similarity_p10_min: 0.9",
            ""
        )),
        ["rollouts[0].gates.embedding_similarity_p10_min: needs mirror.compare.embeddings on route `chat`"]
    );
}

#[test]
fn a_mirror_gate_reads_the_canary_as_the_shadow_with_enough_kept() {
    let elsewhere = EMBEDDING
        .replace("cluster: llm-canary", "cluster: llm-stable")
        .replace("stability: true, ", "");
    assert_eq!(
        errors_in(&config(&elsewhere, ALL_GATES, "").replace("min_requests: 5", "min_requests: 11")),
        [
            "rollouts[0].gates.embedding_similarity_p10_min: route `chat` mirrors to cluster `llm-stable`, not to the canary `llm-canary`",
            "rollouts[0].gates.embedding_similarity_p10_min: min_requests 11 is more than the 10 pairs mirror.compare.embeddings.window keeps: the gate would never be judged",
            "rollouts[0].gates.embedding_drift_kl_max: route `chat` mirrors to cluster `llm-stable`, not to the canary `llm-canary`",
            "rollouts[0].gates.embedding_drift_kl_max: min_requests 11 is more than the 10 pairs mirror.compare.embeddings.window keeps: the gate would never be judged",
            "rollouts[0].gates.answer_dispersion_max: needs mirror.stability on route `chat`",
            "rollouts[0].gates.answer_dispersion_max: route `chat` mirrors to cluster `llm-stable`, not to the canary `llm-canary`",
            "rollouts[0].gates.answer_dispersion_max: min_requests 11 is more than the 10 prompts mirror.compare.embeddings.window keeps: the gate would never be judged",
        ]
    );
    assert_eq!(
        errors_in(&config(EMBEDDING, "embedding_similarity_p10_min: 1.2", "")),
        ["rollouts[0].gates.embedding_similarity_p10_min: 1.2 is not within 0 (excluded) ..= 1: a cosine similarity"]
    );
}

#[test]
fn stability_needs_two_copies_an_embedder_and_one_prompt() {
    assert_eq!(
        errors_in(&config(
            "{ cluster: llm-canary, stability: true, perturb: { rate: 0.2 } }",
            "error_rate: 1%",
            ""
        )),
        [
            "routes[0].mirror.stability: needs copies of at least 2 (the answers to compare), found 1",
            "routes[0].mirror.stability: needs compare.embeddings (the answers are compared by their embeddings)",
            "routes[0].mirror.stability: cannot go with perturb: each copy's prompt is reworded apart, so the answers are to different prompts",
        ]
    );
}

/// The issue's three bad configs at once: an embedder that is not an
/// LLM, a perturbation rate over 1, a gate without `compare.embeddings`.
#[test]
fn bad_embedder_rate_and_gate_are_named_by_path() {
    let text = config(
        "{ cluster: llm-canary, perturb: { rate: 1.5 } }",
        "embedding_drift_kl_max: 0.3",
        "",
    )
    .replace(
        "rollouts:\n",
        "  - name: search\n    listener: public\n    match: { path_prefix: /search }\n    \
         split: { search: 100 }\n    \
         mirror: { cluster: search, compare: { embeddings: { cluster: search } } }\nrollouts:\n",
    );
    assert_eq!(
        errors_in(&text),
        [
            "routes[0].mirror.perturb.rate: 1.5 is not within 0 (excluded) ..= 1",
            "routes[1].mirror.compare.embeddings.cluster: cluster `search` is kind http; the embedder must be kind llm (an OpenAI-compatible /v1/embeddings)",
            "rollouts[0].gates.embedding_drift_kl_max: needs mirror.compare.embeddings on route `chat`",
        ]
    );
}
