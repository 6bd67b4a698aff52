#![allow(clippy::unwrap_used)]

use super::*;

fn lineage(checkpoint: Option<&str>, template: Option<&str>) -> ModelLineage {
    ModelLineage {
        checkpoint: checkpoint.map(|c| c.parse().unwrap()),
        prompt_template: template.map(|t| t.parse().unwrap()),
        ..ModelLineage::default()
    }
}

fn plan_of(from: &str, to: &str, rps: Option<f64>) -> Result<Plan, String> {
    let none = ModelLineage::default();
    plan(
        &PlanInput {
            from: Side {
                version: from,
                lineage: &none,
            },
            to: Side {
                version: to,
                lineage: &none,
            },
            route_rps: rps,
            prompt_spread: None,
        },
        &PlanRules::default(),
    )
}

fn rules_of(p: &Plan, part: &str) -> Vec<String> {
    p.reasons
        .iter()
        .filter(|r| r.part == part)
        .map(|r| r.rule.clone())
        .collect()
}

#[test]
fn versions_read_with_a_v_and_missing_parts() {
    let v: Semver = "v2".parse().unwrap();
    assert_eq!((v.major, v.minor, v.patch), (2, 0, 0));
    let v: Semver = "1.4.2-rc.1+abc".parse().unwrap();
    assert_eq!((v.major, v.minor, v.patch), (1, 4, 2));
    assert_eq!(v.to_string(), "1.4.2-rc.1+abc");
    assert_eq!("V3.1".parse::<Semver>().unwrap().to_string(), "3.1.0");
    for bad in ["latest", "1.2.3.4", "v", "1..2", "1.x", "1.2-", "-1.2"] {
        assert_eq!(
            bad.parse::<Semver>().unwrap_err(),
            format!(
                "`{bad}` is not a semantic version (MAJOR[.MINOR[.PATCH]], a leading `v` \
                 allowed, e.g. v1.4.2)"
            ),
            "{bad}"
        );
    }
}

#[test]
fn a_patch_gets_two_short_steps_and_health_and_error_gates() {
    let p = plan_of("v1.4.2", "v1.4.3", Some(10.0)).unwrap();
    assert_eq!(p.change, Change::Patch);
    assert_eq!(p.steps, [20, 100]);
    assert_eq!(p.hold, Duration::from_secs(60));
    assert_eq!(
        p.gates,
        [
            Gate::ErrorRate,
            Gate::GrpcSuccessRateMin,
            Gate::GpuMemoryMax,
            Gate::UpstreamQueueMax
        ]
    );
    assert!(p.checks.is_empty());
    assert_eq!(rules_of(&p, "steps"), ["patch"]);
    assert_eq!(p.reasons[0].why, "v1.4.2 → v1.4.3 is a patch change");
    assert_eq!(
        p.summary(),
        "plan patch (v1.4.2 → v1.4.3): steps [20, 100] and hold 1m by rule patch; gates \
         error_rate (patch), grpc_success_rate_min (patch), gpu_memory_max (patch), upstream_queue_max (patch); checks none"
    );
}

#[test]
fn a_minor_change_adds_latency_gates_and_a_throughput_check() {
    let p = plan_of("1.4.2", "1.5", Some(10.0)).unwrap();
    assert_eq!(p.change, Change::Minor);
    assert_eq!(p.steps, [5, 20, 50, 100]);
    assert_eq!(p.hold, Duration::from_secs(300));
    assert!(p.gates.contains(&Gate::TtftP95) && p.gates.contains(&Gate::ErrorRate));
    assert!(!p.gates.contains(&Gate::CostPer1kMax));
    assert_eq!(p.checks, [Check::Throughput]);
}

#[test]
fn a_major_change_gets_five_steps_every_gate_and_a_capacity_run() {
    let p = plan_of("v1.4.2", "v2", Some(10.0)).unwrap();
    assert_eq!(p.change, Change::Major);
    assert_eq!(p.steps, [1, 5, 20, 50, 100]);
    assert_eq!(p.hold, Duration::from_secs(600));
    assert_eq!(p.gates, Gate::ALL);
    assert_eq!(p.checks, [Check::CapacityRun, Check::Throughput]);
    assert_eq!(rules_of(&p, "checks.capacity_run"), ["major"]);
    // A rollback from 2.x to 1.x is as big.
    assert_eq!(
        plan_of("2.0.0", "1.9.0", None).unwrap().change,
        Change::Major
    );
}

#[test]
fn a_changed_checkpoint_is_major_whatever_the_version_says() {
    let (a, b) = (
        lineage(Some("hf://m@aaa"), None),
        lineage(Some("hf://m@bbb"), None),
    );
    let p = plan(
        &PlanInput {
            from: Side {
                version: "1.4.2",
                lineage: &a,
            },
            to: Side {
                version: "1.4.3",
                lineage: &b,
            },
            route_rps: Some(1.0),
            prompt_spread: None,
        },
        &PlanRules::default(),
    )
    .unwrap();
    assert_eq!(p.change, Change::Major);
    assert_eq!(rules_of(&p, "steps"), ["checkpoint"]);
    assert_eq!(
        p.reasons[0].why,
        "the checkpoint changed (hf://m@aaa → hf://m@bbb): a new model counts as major"
    );
    // And then a version that is not semver is not needed, nor an error.
    let p = plan(
        &PlanInput {
            from: Side {
                version: "blue",
                lineage: &a,
            },
            to: Side {
                version: "green",
                lineage: &b,
            },
            route_rps: Some(1.0),
            prompt_spread: None,
        },
        &PlanRules::default(),
    )
    .unwrap();
    assert_eq!(p.change, Change::Major);
    // The same checkpoint on both sides: the versions decide.
    let same = plan(
        &PlanInput {
            from: Side {
                version: "1.4.2",
                lineage: &a,
            },
            to: Side {
                version: "1.4.3",
                lineage: &a,
            },
            route_rps: Some(1.0),
            prompt_spread: None,
        },
        &PlanRules::default(),
    )
    .unwrap();
    assert_eq!(same.change, Change::Patch);
}

#[test]
fn a_version_that_is_not_semver_is_an_error_where_the_plan_needs_it() {
    assert_eq!(
        plan_of("v1.4.2", "latest", None).unwrap_err(),
        "to version: `latest` is not a semantic version (MAJOR[.MINOR[.PATCH]], a leading \
         `v` allowed, e.g. v1.4.2)"
    );
}

#[test]
fn a_busy_route_adds_p99_vs_stable() {
    let quiet = plan_of("1.4.2", "1.4.3", Some(500.0)).unwrap();
    assert!(!quiet.gates.contains(&Gate::P99VsStable));
    let busy = plan_of("1.4.2", "1.4.3", Some(800.0)).unwrap();
    assert!(busy.gates.contains(&Gate::P99VsStable));
    assert_eq!(busy.p99_vs_stable_above_rps, None);
    let r = busy
        .reasons
        .iter()
        .find(|r| r.part == "gates.p99_vs_stable")
        .unwrap();
    assert_eq!(
        (r.rule.as_str(), r.why.as_str()),
        ("traffic", "the route takes 800 req/s, above 500")
    );
    // Unknown rate: the gate is there, judged only above the rate.
    let unknown = plan_of("1.4.2", "1.4.3", None).unwrap();
    assert!(unknown.gates.contains(&Gate::P99VsStable));
    assert_eq!(unknown.p99_vs_stable_above_rps, Some(500.0));
}

fn template_plan(from: Option<Spread>, to: Option<Spread>) -> Plan {
    let (a, b) = (
        lineage(None, Some("git://t@1")),
        lineage(None, Some("git://t@2")),
    );
    plan(
        &PlanInput {
            from: Side {
                version: "1.4.2",
                lineage: &a,
            },
            to: Side {
                version: "1.4.3",
                lineage: &b,
            },
            route_rps: Some(1.0),
            prompt_spread: Some((from, to)),
        },
        &PlanRules::default(),
    )
    .unwrap()
}

#[test]
fn a_new_prompt_template_adds_an_input_length_stage_when_its_spread_moves() {
    let lengths = |lo: u64, hi: u64| Spread::of(&(lo..=hi).collect::<Vec<_>>());
    // IQR of 1..=101 is 50 (26 → 76).
    let base = lengths(1, 101);
    assert_eq!(base.unwrap().iqr(), 50.0);
    // 10% wider: within ±15%.
    let p = template_plan(base, lengths(1, 111));
    assert!(!p.checks.contains(&Check::InputLengthStage), "{p:?}");
    // 20% wider: beyond.
    let p = template_plan(base, lengths(1, 121));
    assert!(p.checks.contains(&Check::InputLengthStage));
    let r = p
        .reasons
        .iter()
        .find(|r| r.rule == "prompt_template")
        .unwrap();
    assert_eq!(
        r.why,
        "the prompt template changed (git://t@1 → git://t@2) and the prompt-length spread \
         (IQR) moved +20% (50 → 60 tokens), beyond ±15%"
    );
    // 20% narrower too.
    assert!(template_plan(base, lengths(1, 81))
        .checks
        .contains(&Check::InputLengthStage));
    // Nothing recorded of the new version: the stage, to be safe.
    assert!(template_plan(base, None)
        .checks
        .contains(&Check::InputLengthStage));
}

#[test]
fn spreads_are_interquartile_ranges() {
    assert_eq!(Spread::of(&[]), None);
    let s = Spread::of(&[10, 1, 4, 7]).unwrap();
    // Sorted 1 4 7 10: p25 at 0.75 → 3.25, p75 at 2.25 → 7.75.
    assert_eq!((s.p25, s.p75, s.requests), (3.25, 7.75, 4));
}
