//! The generated PromQL, whole: what an operator would paste into
//! Prometheus to see what the controller saw.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use super::*;
use crate::config::Config;

fn rollout(gates: &str, extra: &str) -> RolloutConfig {
    let yaml = format!(
        "listeners:\n  - {{ name: public, listen: 127.0.0.1:18080, protocol: http }}\n\
         clusters:\n  - {{ name: stable, kind: llm, version: v1, endpoints: [127.0.0.1:18001] }}\n\
         \x20 - {{ name: canary, kind: llm, version: v2, endpoints: [127.0.0.1:18002] }}\n\
         routes:\n  - {{ name: chat, listener: public, split: {{ stable: 100, canary: 0 }} }}\n\
         rollouts:\n  - {{ name: chat-v2, route: chat, stable: stable, canary: canary, \
         gates: {{ {gates} }}, source: {{ prometheus: {{ url: \"http://127.0.0.1:9090\", \
         scrape_interval: 1s{extra} }} }}, window: 8s }}\n"
    );
    Config::from_yaml(&yaml).unwrap().rollouts[0].clone()
}

fn overrides(c: &RolloutConfig) -> BTreeMap<QueryKey, String> {
    match &c.source {
        Some(crate::config::RolloutSource::Prometheus { queries, .. }) => queries.clone(),
        None => BTreeMap::new(),
    }
}

#[test]
fn every_gate_has_a_query_over_the_whole_fleet() {
    let c = rollout(
        "ttft_p95: 150ms, ttft_p99: 1s, gap_p99: 100ms, tpot_p95: 50ms, latency_p99: 10s, \
         error_rate: 1%, p99_vs_stable: 1.2, ttft_vs_stable: 1.5, gpu_memory_max: 90, \
         upstream_queue_max: 8",
        "",
    );
    let q = queries(&c, &overrides(&c));
    let r = r#"route="chat",cluster="canary""#;
    let s = r#"route="chat",cluster="stable""#;
    let want = [
        (
            Gate::TtftP95,
            format!("histogram_quantile(0.95, sum by (le) (rate(gen_ai_client_operation_time_to_first_chunk_seconds_bucket{{{r}}}[8s])))"),
        ),
        (
            Gate::TtftP99,
            format!("histogram_quantile(0.99, sum by (le) (rate(gen_ai_client_operation_time_to_first_chunk_seconds_bucket{{{r}}}[8s])))"),
        ),
        (
            Gate::GapP99,
            format!("histogram_quantile(0.99, sum by (le) (rate(gen_ai_client_operation_time_per_output_chunk_seconds_bucket{{{r}}}[8s])))"),
        ),
        (
            Gate::TpotP95,
            format!("histogram_quantile(0.95, sum by (le) (rate(sluice_time_per_output_token_seconds_bucket{{{r}}}[8s])))"),
        ),
        (
            Gate::LatencyP99,
            format!("histogram_quantile(0.99, sum by (le) (rate(sluice_request_duration_seconds_bucket{{{r}}}[8s])))"),
        ),
        (
            Gate::ErrorRate,
            format!("100 * (sum(increase(sluice_requests_total{{{r},status_class=\"5xx\"}}[8s])) or vector(0)) / sum(increase(sluice_requests_total{{{r}}}[8s]))"),
        ),
        (
            Gate::P99VsStable,
            format!("histogram_quantile(0.99, sum by (le) (rate(sluice_request_duration_seconds_bucket{{{r}}}[8s]))) / histogram_quantile(0.99, sum by (le) (rate(sluice_request_duration_seconds_bucket{{{s}}}[8s])))"),
        ),
        (
            Gate::TtftVsStable,
            format!("histogram_quantile(0.95, sum by (le) (rate(gen_ai_client_operation_time_to_first_chunk_seconds_bucket{{{r}}}[8s]))) / histogram_quantile(0.95, sum by (le) (rate(gen_ai_client_operation_time_to_first_chunk_seconds_bucket{{{s}}}[8s])))"),
        ),
        (
            Gate::GpuMemoryMax,
            "max(100 * sluice_gpu_memory_used_bytes / sluice_gpu_memory_total_bytes)".to_string(),
        ),
        (
            Gate::UpstreamQueueMax,
            r#"sum(max by (endpoint) (sluice_upstream_requests_waiting{cluster="canary"}))"#.to_string(),
        ),
    ];
    assert_eq!(q.gates.len(), want.len());
    for ((gate, got), (g, w)) in q.gates.iter().zip(want) {
        assert_eq!((*gate, got.as_str()), (g, w.as_str()));
    }
    assert_eq!(
        q.canary_requests,
        format!("sum(increase(sluice_requests_total{{{r}}}[8s]))")
    );
    assert_eq!(
        q.stable_requests.as_deref(),
        Some(format!("sum(increase(sluice_requests_total{{{s}}}[8s]))").as_str())
    );
}

#[test]
fn stable_is_asked_only_for_relative_gates() {
    let c = rollout("ttft_p95: 150ms, error_rate: 2", "");
    let q = queries(&c, &overrides(&c));
    assert_eq!(q.stable_requests, None);
    assert_eq!(
        q.gates.iter().map(|(g, _)| *g).collect::<Vec<_>>(),
        [Gate::TtftP95, Gate::ErrorRate]
    );
}

#[test]
fn overrides_replace_a_gate_and_the_request_count_with_placeholders_filled() {
    let c = rollout(
        "ttft_p95: 150ms, p99_vs_stable: 1.5",
        ", queries: { ttft_p95: 'max(my_ttft{svc=\"$route\",v=\"$cluster\"}[$window])', \
         requests: 'sum(increase(http_total{svc=\"$route\",c=\"$cluster\"}[$window]))' }",
    );
    let q = queries(&c, &overrides(&c));
    assert_eq!(q.gates[0].1, r#"max(my_ttft{svc="chat",v="canary"}[8s])"#);
    // Not overridden: generated, with `$stable` filled in.
    assert!(q.gates[1]
        .1
        .ends_with(r#"{route="chat",cluster="stable"}[8s])))"#));
    assert_eq!(
        q.canary_requests,
        r#"sum(increase(http_total{svc="chat",c="canary"}[8s]))"#
    );
    assert_eq!(
        q.stable_requests.as_deref(),
        Some(r#"sum(increase(http_total{svc="chat",c="stable"}[8s]))"#)
    );
}

#[test]
fn placeholders_are_escaped_and_time_gates_scaled() {
    let mut c = rollout("ttft_p95: 150ms", "");
    c.route = r#"a"b\c"#.into();
    c.window = Duration::from_millis(4500);
    assert_eq!(
        expand(
            "x{r=\"$route\",c=\"$cluster\",s=\"$stable\"}[$window]",
            &c,
            "k"
        ),
        r#"x{r="a\"b\\c",c="k",s="stable"}[5s]"#
    );
    assert_eq!(scale(Gate::TtftP95), 1000.0);
    assert_eq!(scale(Gate::LatencyP99), 1000.0);
    assert_eq!(scale(Gate::ErrorRate), 1.0);
    assert_eq!(scale(Gate::P99VsStable), 1.0);
}

#[test]
fn exclude_load_reads_users_traffic_only() {
    let c = rollout(
        "ttft_p95: 150ms, error_rate: 1%, p99_vs_stable: 1.2, exclude_load: true",
        "",
    );
    assert!(c.gates.exclude_load);
    let q = queries(&c, &overrides(&c));
    let r = r#"route="chat",cluster="canary",source="user""#;
    let s = r#"route="chat",cluster="stable",source="user""#;
    let want = [
        format!("histogram_quantile(0.95, sum by (le) (rate(gen_ai_client_operation_time_to_first_chunk_seconds_bucket{{{r}}}[8s])))"),
        format!("100 * (sum(increase(sluice_requests_total{{{r},status_class=\"5xx\"}}[8s])) or vector(0)) / sum(increase(sluice_requests_total{{{r}}}[8s]))"),
        format!("histogram_quantile(0.99, sum by (le) (rate(sluice_request_duration_seconds_bucket{{{r}}}[8s]))) / histogram_quantile(0.99, sum by (le) (rate(sluice_request_duration_seconds_bucket{{{s}}}[8s])))"),
    ];
    let got: Vec<&str> = q.gates.iter().map(|(_, g)| g.as_str()).collect();
    assert_eq!(got, want);
    assert_eq!(
        q.canary_requests,
        format!("sum(increase(sluice_requests_total{{{r}}}[8s]))")
    );
    // An operator's own query may use `$source` too.
    assert_eq!(
        expand("x{a=\"b\"$source}", &c, "k"),
        r#"x{a="b",source="user"}"#
    );
    let counted = rollout("ttft_p95: 150ms", "");
    assert_eq!(expand("x{a=\"b\"$source}", &counted, "k"), r#"x{a="b"}"#);
}

#[test]
fn cost_per_1k_reads_the_cost_counter_or_prices_the_window() {
    // Validation resolves the canary's table; here it is set by hand.
    let mut c = rollout("ttft_p95: 150ms", "");
    c.gates = crate::config::Gates::from([(Gate::CostPer1kMax, 0.012)]);
    c.canary_price = Some(sluice_filters::Price::PerToken(BTreeMap::new()));
    let q = queries(&c, &overrides(&c));
    let r = r#"route="chat",cluster="canary""#;
    assert_eq!(
        q.gates,
        [(
            Gate::CostPer1kMax,
            format!(
                "1000 * sum(increase(sluice_cost_usd_total{{{r}}}[8s])) / \
                 sum(increase(sluice_cost_tokens_total{{{r}}}[8s]))"
            )
        )]
    );
    // $3.60 an hour on 2 GPUs for the 8 s window: $0.016, once for the
    // fleet, over every instance's tokens.
    c.canary_price = Some(sluice_filters::Price::GpuHour {
        usd_per_hour: 3.6,
        gpus: 2.0,
    });
    let q = queries(&c, &overrides(&c));
    assert_eq!(
        q.gates[0].1,
        format!("1000 * 0.016 / sum(increase(gen_ai_client_token_usage_sum{{{r}}}[8s]))")
    );
    assert_eq!(scale(Gate::CostPer1kMax), 1.0);
}

#[test]
fn grpc_success_rate_reads_the_grpc_family_by_failure_code() {
    let c = rollout("grpc_success_rate_min: 95, exclude_load: true", "");
    let q = queries(&c, &overrides(&c));
    let r = r#"route="chat",cluster="canary""#;
    // No `source` label on the gRPC family; a call without a status fails
    // with UNKNOWN (2).
    assert_eq!(
        q.gates,
        [(
            Gate::GrpcSuccessRateMin,
            format!(
                "100 * (1 - (sum(increase(sluice_grpc_requests_total{{{r},grpc_status=~\"2|4|8|13|14|unknown\"}}[8s])) or vector(0)) / sum(increase(sluice_grpc_requests_total{{{r}}}[8s])))"
            )
        )]
    );
    let c = rollout("grpc_success_rate_min: 95, grpc_failure_codes: [14]", "");
    let q = queries(&c, &overrides(&c));
    assert!(
        q.gates[0].1.contains(r#"grpc_status=~"14"}"#),
        "{}",
        q.gates[0].1
    );
}

#[test]
fn the_mirror_gates_read_the_mirror_families_with_their_own_samples() {
    // The route is this controller's own here, so it must embed the canary.
    let mut c = rollout("error_rate: 1%", "");
    c.gates = crate::config::Gates::from([
        (Gate::EmbeddingSimilarityP10Min, 0.9),
        (Gate::EmbeddingDriftKlMax, 0.38),
        (Gate::AnswerDispersionMax, 0.002),
    ]);
    let q = queries(&c, &BTreeMap::new());
    let r = r#"route="chat""#;
    let rc = r#"route="chat",cluster="canary""#;
    assert_eq!(
        q.gates,
        vec![
            (
                Gate::EmbeddingSimilarityP10Min,
                format!("histogram_quantile(0.1, sum by (le) (rate(sluice_mirror_embedding_similarity_bucket{{{r}}}[8s])))"),
            ),
            (
                Gate::EmbeddingDriftKlMax,
                format!("max(sluice_mirror_embedding_drift_kl{{{r}}})"),
            ),
            (
                Gate::AnswerDispersionMax,
                format!("sum(rate(sluice_mirror_answer_dispersion_sum{{{rc}}}[8s])) / sum(rate(sluice_mirror_answer_dispersion_count{{{rc}}}[8s]))"),
            ),
        ]
    );
    let pairs = format!("sum(increase(sluice_mirror_embedding_similarity_count{{{r}}}[8s]))");
    assert_eq!(
        q.mirror_samples,
        vec![
            (Gate::EmbeddingSimilarityP10Min, pairs.clone()),
            (Gate::EmbeddingDriftKlMax, pairs),
            (
                Gate::AnswerDispersionMax,
                format!("sum(increase(sluice_mirror_answer_dispersion_count{{{rc}}}[8s]))")
            ),
        ]
    );
    // Gates of the canary's requests ask for no samples of their own.
    let c = rollout("error_rate: 1%", "");
    assert!(queries(&c, &BTreeMap::new()).mirror_samples.is_empty());
}
