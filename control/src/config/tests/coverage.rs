//! `compare.embeddings.coverage` and the `min_coverage` gate: defaults,
//! bounds and what the gate needs, with full error texts.

use super::super::*;

const BASE: &str = r#"
listeners:
  - { name: public, listen: 127.0.0.1:8080, protocol: http }
clusters:
  - { name: llm-stable, kind: llm, version: v1, endpoints: [127.0.0.1:8000] }
  - { name: llm-canary, kind: llm, version: v2, endpoints: [127.0.0.1:8001] }
  - { name: embedder, kind: llm, endpoints: [127.0.0.1:8002] }
routes:
  - name: chat
    listener: public
    split: { llm-stable: 100, llm-canary: 0 }
"#;

/// Route `chat` with `mirror` (a flow map, or nothing) and one rollout
/// on it with `gates` and `extra` fields.
fn config(mirror: &str, gates: &str, extra: &str) -> String {
    let mirror = if mirror.is_empty() {
        String::new()
    } else {
        format!("    mirror: {mirror}\n")
    };
    format!(
        "{BASE}{mirror}rollouts:\n  - {{ name: chat-v2, route: chat, stable: llm-stable, \
         canary: llm-canary, gates: {{ {gates} }}{extra} }}\n"
    )
}

fn covered(coverage: &str) -> String {
    format!(
        "{{ cluster: llm-canary, percent: 0, compare: {{ embeddings: {{ cluster: embedder, \
         coverage: {coverage} }} }} }}"
    )
}

fn errors_in(text: &str) -> Vec<String> {
    match Config::from_yaml(text) {
        Ok(_) => panic!("config unexpectedly valid:\n{text}"),
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn coverage_has_defaults_and_min_coverage_reads_a_percent() {
    let c = Config::from_yaml(&config(&covered("{}"), "min_coverage: 50%", "")).unwrap();
    let coverage = c.routes[0]
        .mirror
        .as_ref()
        .unwrap()
        .compare
        .embeddings
        .as_ref()
        .unwrap()
        .coverage
        .clone();
    assert_eq!(
        coverage,
        Some(CoverageConfig {
            sample: 0.2,
            max_per_second: 20,
            similarity: 0.82,
            max_clusters: 256,
        })
    );
    assert_eq!(
        c.rollouts[0].gates.bounds(),
        vec![(Gate::MinCoverage, 50.0)]
    );
    // A number is a percent too, as for every percent gate.
    let c = Config::from_yaml(&config(
        &covered("{ sample: 1, max_per_second: 5, similarity: 0.9, max_clusters: 8 }"),
        "min_coverage: 75, error_rate: 1%",
        "",
    ))
    .unwrap();
    assert_eq!(c.rollouts[0].gates.bounds()[1], (Gate::MinCoverage, 75.0));
}

#[test]
fn bad_coverage_settings_are_named_by_path() {
    assert_eq!(
        errors_in(&config(
            &covered("{ sample: 0, max_per_second: 0, similarity: 1.5, max_clusters: 0 }"),
            "error_rate: 1%",
            ""
        )),
        [
            "routes[0].mirror.compare.embeddings.coverage.sample: 0 is not within 0 (excluded) ..= 1",
            "routes[0].mirror.compare.embeddings.coverage.max_per_second: must be at least 1",
            "routes[0].mirror.compare.embeddings.coverage.similarity: 1.5 is not within 0 (excluded) ..= 1",
            "routes[0].mirror.compare.embeddings.coverage.max_clusters: 0 is not within 1..=4096",
        ]
    );
}

#[test]
fn min_coverage_needs_the_route_to_cluster_its_prompts() {
    assert_eq!(
        errors_in(&config("", "min_coverage: 50%", "")),
        ["rollouts[0].gates.min_coverage: needs mirror.compare.embeddings.coverage on route `chat` (its embedder clusters the prompts)"]
    );
    let no_coverage = "{ cluster: llm-canary, compare: { embeddings: { cluster: embedder } } }";
    assert_eq!(
        errors_in(&config(no_coverage, "min_coverage: 50%", "")),
        ["rollouts[0].gates.min_coverage: needs mirror.compare.embeddings.coverage on route `chat` (its embedder clusters the prompts)"]
    );
}

#[test]
fn min_coverage_is_above_0_and_not_in_fleet_mode() {
    assert_eq!(
        errors_in(&config(&covered("{}"), "min_coverage: 0%", "")),
        ["rollouts[0].gates.min_coverage: 0% is not within 0 (excluded) ..= 100%: it would hold nothing"]
    );
    assert_eq!(
        errors_in(&config(&covered("{}"), "min_coverage: 120%", "")),
        ["rollouts[0].gates.min_coverage: 120 is not within 0..=100"]
    );
    assert_eq!(
        errors_in(&config(
            &covered("{}"),
            "min_coverage: 50%",
            ", source: { prometheus: { url: 'http://127.0.0.1:9090' } }"
        )),
        ["rollouts[0].gates.min_coverage: is not read in fleet mode (source.prometheus): each instance clusters its own prompts"]
    );
}
