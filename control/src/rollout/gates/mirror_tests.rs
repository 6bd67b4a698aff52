//! The gates that read the route's mirror, judged on made-up readings:
//! pass, fail, too few pairs, and nothing to read.

#![allow(clippy::unwrap_used)]

use sluice_filters::DriftReading;

use super::*;
use crate::config::RolloutConfig;

fn config(gate: Gate, bound: f64) -> RolloutConfig {
    RolloutConfig {
        steps: vec![1, 100],
        min_requests: 10,
        consecutive: 1,
        ..crate::testing::rollout_config(Gates::from([(gate, bound)]))
    }
}

fn reading(config: &RolloutConfig, shadow: Option<ShadowReading>) -> GateReading {
    let obs = Observation::Windows {
        canary: &WindowView::default(),
        stable: &WindowView::default(),
        gpu_memory_percent: None,
        upstream_waiting: None,
        shadow,
        coverage: None,
    };
    judge(config, &obs).pop().unwrap()
}

fn drift(p10: f64, kl: Option<f64>, pairs: usize) -> Option<ShadowReading> {
    Some(ShadowReading {
        drift: DriftReading {
            kl,
            p10: Some(p10),
            pairs,
        },
        ..ShadowReading::default()
    })
}

#[test]
fn the_similarity_p10_is_a_lower_bound_on_the_pairs_kept() {
    let c = config(Gate::EmbeddingSimilarityP10Min, 0.9);
    let r = reading(&c, drift(0.95, None, 12));
    assert_eq!((r.value, r.ok, r.samples), (Some(0.95), Some(true), 12));
    assert_eq!(
        r.describe(),
        "embedding_similarity_p10_min 0.95 >= 0.9 (12 samples)"
    );
    let r = reading(&c, drift(0.62, None, 12));
    assert!(r.breached(), "{r:?}");
    assert_eq!(
        r.describe(),
        "embedding_similarity_p10_min 0.62 < 0.9 (12 samples)"
    );
    // Nine pairs are under `min_requests`: read, not judged.
    let r = reading(&c, drift(0.62, None, 9));
    assert_eq!((r.value, r.ok), (Some(0.62), None));
    // A route that does not mirror to the canary: nothing to read.
    let r = reading(&c, None);
    assert_eq!((r.value, r.ok, r.samples), (None, None, 0));
}

#[test]
fn the_drift_kl_is_judged_once_the_window_is_full() {
    let c = config(Gate::EmbeddingDriftKlMax, 0.38);
    let r = reading(&c, drift(0.9, Some(0.12), 20));
    assert_eq!((r.value, r.ok), (Some(0.12), Some(true)));
    let r = reading(&c, drift(0.4, Some(0.58), 20));
    assert_eq!(
        r.describe(),
        "embedding_drift_kl_max 0.58 > 0.38 (20 samples)"
    );
    // Baseline still filling: no KL yet, whatever the pairs.
    let r = reading(&c, drift(0.4, None, 20));
    assert_eq!((r.value, r.ok), (None, None));
}

#[test]
fn answer_dispersion_is_the_mean_over_the_prompts_kept() {
    let c = config(Gate::AnswerDispersionMax, 0.002);
    let shadow = |mean: f64, prompts: usize| {
        Some(ShadowReading {
            dispersion: Some(mean),
            prompts,
            ..ShadowReading::default()
        })
    };
    let r = reading(&c, shadow(0.0004, 10));
    assert_eq!((r.ok, r.samples), (Some(true), 10));
    // Small figures keep their digits.
    assert_eq!(
        r.describe(),
        "answer_dispersion_max 0.0004 <= 0.002 (10 samples)"
    );
    let r = reading(&c, shadow(0.0125, 10));
    assert!(r.breached(), "{r:?}");
    let r = reading(&c, shadow(0.0125, 3));
    assert_eq!(r.ok, None);
}
