//! Answer stability's recording: histograms by route, shadow cluster and
//! version, and the window `answer_dispersion_max` reads.

#![allow(clippy::unwrap_used)]

use sluice_filters::{Dispersion, Metrics};

use crate::snapshot::Snapshot;
use crate::stats::Stats;
use crate::testing::{self, two_clusters};

fn snapshot(stability: bool, metrics: &Metrics) -> Snapshot {
    let yaml = format!(
        "{}routes:\n  - {{ name: chat, listener: public, split: {{ a: 100, b: 0 }}, \
         mirror: {{ cluster: b, copies: 2, stability: {stability}, \
         compare: {{ embeddings: {{ cluster: a, window: 3 }} }} }} }}\n",
        two_clusters("a", "b")
    );
    Snapshot::build(
        std::sync::Arc::new(testing::config(&yaml)),
        1,
        None,
        metrics,
        &Stats::new(),
    )
}

fn spread(centroid_variance: f64, mean_pairwise: f64) -> Dispersion {
    Dispersion {
        centroid_variance,
        mean_pairwise,
    }
}

#[test]
fn dispersion_goes_to_the_shadows_histograms_and_the_gates_window() {
    let metrics = Metrics::new().unwrap();
    let s = snapshot(true, &metrics);
    let mirror = s.route("chat").unwrap().mirror.clone().unwrap();
    assert_eq!(mirror.reading().prompts, 0);
    for d in [
        spread(0.5, 0.1),
        spread(0.001, 0.99),
        spread(0.002, 0.98),
        spread(0.003, 0.97),
    ] {
        mirror.record_dispersion(d);
    }
    // The window keeps the last three prompts.
    let r = mirror.reading();
    assert_eq!(r.prompts, 3);
    assert!((r.dispersion.unwrap() - 0.002).abs() < 1e-12, "{r:?}");
    // Every prompt is in the histograms, labelled with the shadow `b` at v2.
    let text = metrics.encode();
    let labels = r#"{cluster="b",route="chat",version="v2"}"#;
    assert!(
        text.contains(&format!("sluice_mirror_answer_dispersion_count{labels} 4")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "sluice_mirror_answer_pairwise_similarity_sum{labels} 3.04"
        )),
        "{text}"
    );
}

#[test]
fn without_stability_nothing_is_recorded() {
    let metrics = Metrics::new().unwrap();
    let s = snapshot(false, &metrics);
    let mirror = s.route("chat").unwrap().mirror.clone().unwrap();
    mirror.record_dispersion(spread(0.5, 0.1));
    assert_eq!(mirror.reading().prompts, 0);
    assert!(!metrics
        .encode()
        .contains("sluice_mirror_answer_dispersion_count{"));
}
