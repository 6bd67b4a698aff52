//! `cost_per_1k_max` judged from made-up windows, with the numbers worked
//! by hand.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use sluice_filters::ModelPrice;

use super::*;
use crate::config::RolloutConfig;
use crate::stats::{Sample, Stats, TokenSample};

fn config(price: Option<Price>, bound: f64) -> RolloutConfig {
    RolloutConfig {
        steps: vec![1, 100],
        consecutive: 1,
        canary_price: price,
        ..crate::testing::rollout_config(Gates::from([(Gate::CostPer1kMax, bound)]))
    }
}

/// `n` answers of 10 input and 10 output tokens, each charged `usd` by
/// the data plane (`None`: a model the table lacks).
fn window(n: u64, usd: Option<f64>) -> WindowView {
    let key = Stats::new().key("chat", "b", "v2");
    let mut v = WindowView::default();
    for _ in 0..n {
        v.add(&Sample {
            key,
            status: 200,
            latency: Duration::from_millis(200),
            tokens: Some(TokenSample {
                input_tokens: 10,
                output_tokens: 10,
                cost_usd: usd,
                ..TokenSample::default()
            }),
            load: false,
            grpc: None,
        });
    }
    v
}

fn reading(config: &RolloutConfig, canary: &WindowView) -> GateReading {
    let obs = Observation::Windows {
        canary,
        stable: &WindowView::default(),
        gpu_memory_percent: None,
        upstream_waiting: None,
        shadow: None,
        coverage: None,
    };
    judge(config, &obs).pop().unwrap()
}

fn per_token() -> Price {
    Price::PerToken(BTreeMap::from([(
        "m".to_string(),
        ModelPrice {
            input_per_1k: 0.001,
            output_per_1k: 0.003,
        },
    )]))
}

#[test]
fn per_token_prices_are_read_from_what_the_data_plane_charged() {
    // Each answer: (10 × 0.001 + 10 × 0.003) / 1000 = $0.00004 for 20
    // tokens, so $0.002 per 1k, above a $0.0015 bound.
    let usd = per_token()
        .cost_usd(&Usage {
            model: "m",
            input_tokens: 10,
            output_tokens: 10,
            seconds: 0.0,
        })
        .unwrap();
    assert!((usd - 0.00004).abs() < 1e-18, "{usd}");
    let r = reading(&config(Some(per_token()), 0.0015), &window(150, Some(usd)));
    assert!((r.value.unwrap() - 0.002).abs() < 1e-12, "{r:?}");
    assert_eq!((r.ok, r.samples, r.unit), (Some(false), 150, Unit::Usd));
    assert_eq!(
        r.describe(),
        "cost_per_1k_max $0.002 > $0.0015 (150 samples)"
    );
    let r = reading(&config(Some(per_token()), 0.0025), &window(150, Some(usd)));
    assert_eq!(
        r.describe(),
        "cost_per_1k_max $0.002 <= $0.0025 (150 samples)"
    );
    // Answers of a model the table lacks neither dilute the price nor
    // count as its samples.
    let mut mixed = window(150, Some(usd));
    mixed.merge(&window(450, None));
    let r = reading(&config(Some(per_token()), 0.0015), &mixed);
    assert!((r.value.unwrap() - 0.002).abs() < 1e-12, "{r:?}");
    assert_eq!((r.ok, r.samples), (Some(false), 150));
}

#[test]
fn a_gpu_hour_price_is_paid_for_the_whole_window() {
    // $3.60 an hour on 2 GPUs over a 10 s window: $0.02, whatever flowed.
    // 150 answers × 20 tokens = 3,000 tokens: $0.02 × 1000 / 3000.
    let price = Price::GpuHour {
        usd_per_hour: 3.6,
        gpus: 2.0,
    };
    let r = reading(&config(Some(price.clone()), 0.012), &window(150, None));
    assert!((r.value.unwrap() - 0.02 / 3.0).abs() < 1e-12, "{r:?}");
    assert_eq!(r.ok, Some(true));
    assert_eq!(
        r.describe(),
        "cost_per_1k_max $0.006667 <= $0.012 (150 samples)"
    );
    // A tenth of the traffic on the same GPUs costs ten times as much a token.
    let r = reading(&config(Some(price), 0.012), &window(15, None));
    assert!((r.value.unwrap() - 0.2 / 3.0).abs() < 1e-12, "{r:?}");
    // ...but 15 answers are under `min_requests`: not judged.
    assert_eq!(r.ok, None);
}

#[test]
fn too_few_tokens_or_no_price_is_not_judged() {
    let r = reading(
        &config(Some(per_token()), 0.0015),
        &window(99, Some(0.00004)),
    );
    assert_eq!((r.ok, r.samples), (None, 99));
    assert!(r.value.is_some());
    // No tokens: nothing to divide by.
    let r = reading(&config(Some(per_token()), 0.0015), &WindowView::default());
    assert_eq!((r.value, r.ok), (None, None));
    assert_eq!(r.describe(), "cost_per_1k_max n/a vs $0.0015 (0 samples)");
    // A fleet controller without the canary's table reads figures instead.
    let r = reading(&config(None, 0.0015), &window(150, Some(0.00004)));
    assert_eq!((r.value, r.ok), (None, None));
}
