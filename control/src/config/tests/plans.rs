//! `plans:` and `plan: auto` on a rollout.

use std::time::Duration;

use super::*;

/// GOOD with the clusters at these versions and a rollout on `chat` with
/// `extra` fields, then `tail` (more top-level keys).
fn with_plan(stable: &str, canary: &str, extra: &str, tail: &str) -> String {
    let text = GOOD
        .replacen("version: v1,", &format!("version: {stable},"), 1)
        .replacen("version: v2,", &format!("version: {canary},"), 1);
    format!(
        "{text}rollouts:\n  - {{ name: chat-v2, route: chat, stable: llm-stable, \
         canary: llm-canary, plan: auto{extra} }}\n{tail}"
    )
}

#[test]
fn plan_auto_sets_steps_hold_and_gates_from_the_versions() {
    let c = Config::from_yaml(&with_plan("v1.4.2", "v1.4.3", "", "")).unwrap();
    let r = &c.rollouts[0];
    assert_eq!(r.steps, [20, 100]);
    assert_eq!(r.hold, Duration::from_secs(60));
    assert_eq!(
        r.gates.bounds(),
        [(Gate::ErrorRate, 1.0), (Gate::P99VsStable, 1.2)]
    );
    assert_eq!(r.p99_vs_stable_above_rps, Some(500.0));
    assert_eq!(
        r.plan.as_ref().unwrap().change,
        sluice_filters::Change::Patch
    );

    let c = Config::from_yaml(&with_plan(
        "v1.4.2",
        "v2",
        ", gates: { ttft_p95: 800ms, error_rate: 2% }",
        "",
    ))
    .unwrap();
    let r = &c.rollouts[0];
    assert_eq!(r.steps, [1, 5, 20, 50, 100]);
    assert_eq!(r.hold, Duration::from_secs(600));
    // The rollout's own bounds win; scale-free gates get the plan's.
    assert_eq!(
        r.gates.bounds(),
        [
            (Gate::TtftP95, 800.0),
            (Gate::ErrorRate, 2.0),
            (Gate::P99VsStable, 1.2),
            (Gate::TtftVsStable, 1.25),
        ]
    );
}

#[test]
fn a_patch_drops_the_rollouts_latency_gate_and_says_so() {
    let c = Config::from_yaml(&with_plan(
        "1.4.2",
        "1.4.3",
        ", gates: { ttft_p95: 800ms }",
        "",
    ))
    .unwrap();
    let r = &c.rollouts[0];
    assert!(!r.gates.bounds().iter().any(|(g, _)| *g == Gate::TtftP95));
    let why: Vec<_> = r
        .plan
        .as_ref()
        .unwrap()
        .reasons
        .iter()
        .filter(|x| x.part == "gates.ttft_p95")
        .map(|x| x.why.as_str())
        .collect();
    assert_eq!(
        why,
        ["not judged: a patch change judges only the plan's gates"]
    );
}

#[test]
fn a_changed_checkpoint_plans_a_major_release_of_a_patch_version() {
    let text = with_plan("1.4.2", "1.4.3", "", "")
        .replacen(
            "version: 1.4.2,",
            "version: 1.4.2, lineage: { checkpoint: hf://m@aaa },",
            1,
        )
        .replacen(
            "version: 1.4.3,",
            "version: 1.4.3, lineage: { checkpoint: hf://m@bbb },",
            1,
        );
    let c = Config::from_yaml(&text).unwrap();
    assert_eq!(c.rollouts[0].steps, [1, 5, 20, 50, 100]);
}

#[test]
fn plans_override_the_rules() {
    let c = Config::from_yaml(&with_plan(
        "1.4.2",
        "1.4.3",
        "",
        "plans:\n  patch: { steps: [50, 100], hold: 20s, gates: [error_rate] }\n  \
         high_traffic_rps: 100\n  prompt_spread_change: 25%\n",
    ))
    .unwrap();
    let r = &c.rollouts[0];
    assert_eq!(r.steps, [50, 100]);
    assert_eq!(r.hold, Duration::from_secs(20));
    assert_eq!(r.p99_vs_stable_above_rps, Some(100.0));
    assert_eq!(c.plans.prompt_spread_change, 0.25);
    assert_eq!(c.plans.patch.gates, [Gate::ErrorRate]);
    // Untouched rules keep the built-in ones.
    assert_eq!(c.plans.major.steps, [1, 5, 20, 50, 100]);
}

#[test]
fn bad_plans_and_plan_auto_errors_name_where() {
    assert_eq!(
        errors_in(&with_plan("v1.4.2", "latest", "", "")),
        [
            "rollouts[0].plan: to version: `latest` is not a semantic version \
          (MAJOR[.MINOR[.PATCH]], a leading `v` allowed, e.g. v1.4.2)"
        ]
    );
    assert_eq!(
        errors_in(&with_plan("v1", "v2", ", steps: [10, 100], hold: 1m", "")),
        [
            "rollouts[0].steps: set by `plan: auto`: remove one of them",
            "rollouts[0].hold: set by `plan: auto`: remove one of them",
        ]
    );
    assert_eq!(
        errors_in(&with_plan(
            "v1",
            "v2",
            "",
            "plans:\n  minor: { steps: [10, 90], gates: [error_rate, speed] }\n  \
             high_traffic_rps: 0\n  prompt_spread_change: 150%\n",
        )),
        [
            "plans.minor.steps: the last step must be 100, found 90",
            "plans.minor.gates[1]: unknown gate `speed` (expected one of ttft_p95, ttft_p99, \
             gap_p99, tpot_p95, latency_p99, error_rate, p99_vs_stable, ttft_vs_stable, \
             gpu_memory_max, upstream_queue_max, cost_per_1k_max, grpc_success_rate_min, embedding_similarity_p10_min, embedding_drift_kl_max, answer_dispersion_max, min_coverage)",
            "plans.high_traffic_rps: must be greater than 0, found 0",
            "plans.prompt_spread_change: 150 is not within 0..=100",
        ]
    );
    assert_eq!(
        errors_in(&with_plan("v1", "v2", "", "").replace("plan: auto", "plan: manual")),
        ["rollouts[0].plan: unknown variant `manual`, expected `auto` at line 19 column 81"]
    );
}
