//! `clusters[].cost` (the price table) and the `cost_per_1k_max` gate that
//! reads the canary's.

use std::collections::BTreeMap;

use super::*;
use sluice_filters::{ModelPrice, Price};

/// GOOD with a rollout on `chat` whose gates are `gates`.
fn with_rollout(cluster_yaml: &str, gates: &str) -> String {
    let text = GOOD.replacen("version: v2,", &format!("version: v2, {cluster_yaml}"), 1);
    format!(
        "{text}rollouts:\n  - {{ name: chat-v2, route: chat, stable: llm-stable, \
         canary: llm-canary, gates: {gates} }}\n"
    )
}

#[test]
fn a_cluster_reads_either_price_table() {
    let c = Config::from_yaml(&GOOD.replacen(
        "version: v2,",
        "version: v2, cost: { models: { llama: { input_per_1k: 0.0005, output_per_1k: 0.0015 } } },",
        1,
    ))
    .unwrap();
    let want = BTreeMap::from([(
        "llama".to_string(),
        ModelPrice {
            input_per_1k: 0.0005,
            output_per_1k: 0.0015,
        },
    )]);
    assert_eq!(c.clusters[1].cost, Some(Price::PerToken(want)));
    assert_eq!(c.clusters[0].cost, None);
    let c = Config::from_yaml(&GOOD.replacen(
        "version: v2,",
        "version: v2, cost: { gpu_hour: 2.5, gpus: 2 },",
        1,
    ))
    .unwrap();
    assert_eq!(
        c.clusters[1].cost,
        Some(Price::GpuHour {
            usd_per_hour: 2.5,
            gpus: 2.0
        })
    );
    // What `GET /v1/config` shows reads back the same.
    let written = serde_json::to_string(&c.raw).unwrap();
    assert!(
        written.contains(r#""cost":{"gpu_hour":2.5,"gpus":2.0}"#),
        "{written}"
    );
    assert_eq!(RawConfig::from_yaml(&written).unwrap(), c.raw);
}

#[test]
fn bad_price_tables_are_named_by_path() {
    assert_eq!(
        errors_of(
            "version: v2,",
            "version: v2, cost: { gpu_hour: 0, gpus: -1 },"
        ),
        [
            "clusters[1].cost.gpu_hour: must be a price > 0, found 0",
            "clusters[1].cost.gpus: must be > 0, found -1",
        ]
    );
    assert_eq!(
        errors_of(
            "version: v2,",
            "version: v2, cost: { models: { m: { input_per_1k: -1, output_per_1k: 0 } } },"
        ),
        ["clusters[1].cost.models.m.input_per_1k: must be a price ≥ 0, found -1"]
    );
    assert_eq!(
        errors_of("version: v2,", "version: v2, cost: {},"),
        ["clusters[1].cost: give `gpu_hour` (with `gpus`) or `models`"]
    );
    let e = errors_of("version: v2,", "version: v2, cost: { gpu_hours: 2 },");
    assert!(
        e[0].starts_with(
            "clusters[1].cost.gpu_hours: unknown field `gpu_hours`, expected one of \
             `gpu_hour`, `gpus`, `models`"
        ),
        "{e:?}"
    );
}

#[test]
fn the_gate_reads_the_canary_price() {
    let c = Config::from_yaml(&with_rollout(
        "cost: { gpu_hour: 2.5 },",
        "{ cost_per_1k_max: $0.012 }",
    ))
    .unwrap();
    let r = &c.rollouts[0];
    assert_eq!(r.gates.bounds(), [(Gate::CostPer1kMax, 0.012)]);
    assert_eq!(
        r.canary_price,
        Some(Price::GpuHour {
            usd_per_hour: 2.5,
            gpus: 1.0
        })
    );
    let c = Config::from_yaml(&with_rollout(
        "cost: { gpu_hour: 2.5 },",
        "{ cost_per_1k_max: 0.5 }",
    ))
    .unwrap();
    assert_eq!(c.rollouts[0].gates.bounds(), [(Gate::CostPer1kMax, 0.5)]);
    // Without the gate the price stays with the cluster alone.
    let c = Config::from_yaml(&with_rollout(
        "cost: { gpu_hour: 2.5 },",
        "{ ttft_p95: 1s }",
    ))
    .unwrap();
    assert_eq!(c.rollouts[0].canary_price, None);
}

#[test]
fn the_gate_needs_a_priced_canary_and_a_price() {
    assert_eq!(
        errors_in(&with_rollout("", "{ cost_per_1k_max: 0.012 }")),
        [
            "rollouts[0].gates.cost_per_1k_max: canary cluster `llm-canary` has no `cost:` \
          price table (clusters[1].cost)"
        ]
    );
    assert_eq!(
        errors_in(&with_rollout(
            "cost: { gpu_hour: 1 },",
            "{ cost_per_1k_max: free }"
        )),
        ["rollouts[0].gates.cost_per_1k_max: must be a price in USD > 0 like 0.012, found `free`"]
    );
    assert_eq!(
        errors_in(&with_rollout(
            "cost: { gpu_hour: 1 },",
            "{ cost_per_1k_max: 0 }"
        )),
        ["rollouts[0].gates.cost_per_1k_max: must be a price in USD > 0 like 0.012, found 0"]
    );
}
