#![allow(clippy::unwrap_used)]

use super::*;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn cosine_of_known_pairs() {
    assert!(close(cosine(&[1.0, 0.0], &[0.0, 1.0]).unwrap(), 0.0));
    assert!(close(
        cosine(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]).unwrap(),
        1.0
    ));
    assert!(close(cosine(&[1.0, 0.0], &[-1.0, 0.0]).unwrap(), -1.0));
    assert!(close(
        cosine(&[1.0, 1.0], &[1.0, 0.0]).unwrap(),
        std::f64::consts::FRAC_1_SQRT_2
    ));
    assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), None);
    assert_eq!(cosine(&[1.0], &[1.0, 0.0]), None);
    assert_eq!(cosine(&[], &[]), None);
}

#[test]
fn kl_of_the_same_histogram_is_zero() {
    let values: Vec<f64> = (0..100).map(|i| f64::from(i) / 100.0).collect();
    assert_eq!(similarity_kl(&values, &values), 0.0);
}

#[test]
fn kl_of_two_opposite_histograms_by_hand() {
    // Window: ten in the last bin; baseline: ten in the first. With 0.5 in
    // every bin, each has 20 in all: p = 10.5/20 = 0.525 where its values
    // are, 0.025 elsewhere. Only the two end bins differ:
    // 0.025·ln(0.025/0.525) + 0.525·ln(0.525/0.025) = 0.5·ln 21.
    let kl = similarity_kl(&[0.99; 10], &[0.01; 10]);
    assert!(close(kl, 0.5 * 21f64.ln()), "{kl}");
    // Out of range values land in the end bins.
    assert!(close(similarity_kl(&[1.0; 10], &[-0.3; 10]), kl));
}

#[test]
fn kl_grows_as_the_window_moves_away_from_the_baseline() {
    // Seeded synthetic similarities: a baseline around 0.95, windows whose
    // mean moves down by a known shift (a triangular spread of ±0.03).
    let spread = |centre: f64, n: usize| -> Vec<f64> {
        (0..n)
            .map(|i| {
                let u = (i as f64 + 0.5) / n as f64;
                let t = if u < 0.5 {
                    (2.0 * u).sqrt() - 1.0
                } else {
                    1.0 - (2.0 - 2.0 * u).sqrt()
                };
                centre + 0.03 * t
            })
            .collect()
    };
    let baseline = spread(0.95, 200);
    let same = similarity_kl(&spread(0.95, 200), &baseline);
    let near = similarity_kl(&spread(0.90, 200), &baseline);
    let far = similarity_kl(&spread(0.70, 200), &baseline);
    assert!(same < 1e-12, "{same}");
    assert!(near > 0.38 && far > near, "{near} {far}");
}

#[test]
fn quantiles_by_nearest_rank() {
    let values: Vec<f64> = (1..=10).rev().map(f64::from).collect();
    assert_eq!(quantile(&values, 0.1), Some(1.0));
    assert_eq!(quantile(&values, 0.5), Some(5.0));
    assert_eq!(quantile(&values, 0.11), Some(2.0));
    assert_eq!(quantile(&values, 1.0), Some(10.0));
    assert_eq!(quantile(&values, 0.0), Some(1.0));
    assert_eq!(quantile(&[], 0.1), None);
}

#[test]
fn the_drift_window_reads_after_a_baseline_and_a_full_window() {
    let mut drift = DriftWindow::new(3);
    for s in [0.9, 0.95, 1.0] {
        assert_eq!(drift.push(s).kl, None);
    }
    assert_eq!(drift.push(0.9).kl, None);
    assert_eq!(drift.push(0.95).kl, None);
    let full = drift.push(1.0);
    assert_eq!(full.kl, Some(0.0));
    assert_eq!(full.p10, Some(0.9));
    // The window slides: three low pairs move it away from the baseline.
    drift.push(0.2);
    drift.push(0.2);
    let low = drift.push(0.2);
    assert!(low.kl.unwrap() > 0.38, "{low:?}");
    assert_eq!(low.p10, Some(0.2));
}

#[test]
fn dispersion_of_known_sets() {
    let same = dispersion(&[vec![1.0, 2.0], vec![2.0, 4.0], vec![0.5, 1.0]]).unwrap();
    assert!(
        close(same.centroid_variance, 0.0) && close(same.mean_pairwise, 1.0),
        "{same:?}"
    );

    let orthogonal = dispersion(&[vec![1.0, 0.0], vec![0.0, 3.0]]).unwrap();
    assert!(close(orthogonal.centroid_variance, 0.0));
    assert!(close(orthogonal.mean_pairwise, 0.0));

    // e1, e1, e2: centroid (2, 1); similarities 2/√5, 2/√5, 1/√5.
    let d = dispersion(&[vec![1.0, 0.0], vec![1.0, 0.0], vec![0.0, 1.0]]).unwrap();
    let s = [2.0 / 5f64.sqrt(), 2.0 / 5f64.sqrt(), 1.0 / 5f64.sqrt()];
    let mean = s.iter().sum::<f64>() / 3.0;
    let variance = s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 3.0;
    assert!((d.centroid_variance - variance).abs() < 1e-6, "{d:?}");
    assert!((d.mean_pairwise - 1.0 / 3.0).abs() < 1e-6);

    assert_eq!(dispersion(&[vec![1.0, 0.0]]), None);
    assert_eq!(dispersion(&[vec![1.0, 0.0], vec![1.0]]), None);
    assert_eq!(dispersion(&[vec![1.0, 0.0], vec![0.0, 0.0]]), None);
}

#[test]
fn the_p10_reads_the_last_window_of_pairs_across_the_baseline() {
    let mut drift = DriftWindow::new(4);
    assert_eq!(drift.reading(), DriftReading::default());
    let r = drift.push(0.5);
    assert_eq!((r.p10, r.pairs, r.kl), (Some(0.5), 1, None));
    for s in [0.9, 0.9, 0.9] {
        drift.push(s);
    }
    // Baseline full; two window pairs: the last four are 0.9 0.9 1.0 1.0.
    drift.push(1.0);
    let r = drift.push(1.0);
    assert_eq!((r.p10, r.pairs, r.kl), (Some(0.9), 4, None));
    assert_eq!(drift.reading(), r);
    drift.push(1.0);
    let full = drift.push(1.0);
    assert_eq!((full.p10, full.pairs), (Some(1.0), 4));
    assert!(full.kl.unwrap() > 0.0, "{full:?}");
}

#[test]
fn recent_values_keep_the_last_size_and_their_mean() {
    let mut recent = RecentValues::new(3);
    assert_eq!((recent.mean(), recent.len()), (None, 0));
    for v in [9.0, 1.0, 2.0, 3.0] {
        recent.push(v);
    }
    assert_eq!((recent.mean(), recent.len()), (Some(2.0), 3));
}

#[test]
fn a_saved_baseline_is_compared_from_the_first_full_window() {
    // The saved pairs are 0.01 ten times; a window of ten at 0.99 is all the
    // mass moved from the first bin to the last: ½ ln 21 at once, with no
    // first window spent as the baseline.
    let mut drift = DriftWindow::with_baseline(10, vec![0.01; 10]);
    assert_eq!(drift.baseline(), Some(&[0.01; 10][..]));
    for _ in 0..9 {
        assert_eq!(drift.push(0.99).kl, None);
    }
    let full = drift.push(0.99);
    assert!(close(full.kl.unwrap(), 0.5 * 21f64.ln()), "{full:?}");
    // The p10 reads this run's pairs alone, never the saved ones.
    let mut fresh = DriftWindow::with_baseline(4, vec![0.1; 4]);
    let r = fresh.push(0.9);
    assert_eq!((r.p10, r.pairs), (Some(0.9), 1));
    // A baseline of its own is whole only after `size` pairs.
    let mut own = DriftWindow::new(2);
    own.push(0.5);
    assert_eq!((own.baseline(), own.baseline_progress()), (None, (1, 2)));
    own.push(0.6);
    assert_eq!(own.baseline(), Some(&[0.5, 0.6][..]));
}

#[test]
fn a_saved_baseline_round_trips_through_its_file() {
    let saved = SavedBaseline::new("chat", vec![0.5, 0.975, 1.0, -0.25]);
    let text = saved.to_json();
    assert!(text.contains("\"v\": 1"), "{text}");
    assert_eq!(SavedBaseline::parse(&text), Ok(saved));
    // `route` is optional provenance.
    assert_eq!(
        SavedBaseline::parse(r#"{"v": 1, "similarities": [0.9]}"#).map(|b| b.similarities),
        Ok(vec![0.9])
    );
}

#[test]
fn a_bad_baseline_file_names_where() {
    let bad = |text: &str| SavedBaseline::parse(text).unwrap_err();
    assert_eq!(
        bad("{\"v\": 1,\n \"similarities\": [0.9,"),
        "line 2 column 22: similarities: EOF while parsing a value"
    );
    assert_eq!(
        bad(r#"{"v": 1, "similarities": [0.9, "high"]}"#),
        "line 1 column 37: similarities[1]: invalid type: string \"high\", expected f64"
    );
    assert_eq!(
        bad(r#"{"v": 1, "similarities": [0.9], "bins": 20}"#),
        "line 1 column 38: bins: unknown field `bins`, expected one of `v`, `route`, `similarities`"
    );
    assert_eq!(
        bad(r#"{"similarities": [0.9]}"#),
        "line 1 column 23: missing field `v`"
    );
    assert_eq!(
        bad(r#"{"v": 2, "similarities": [0.9]}"#),
        "v: version 2 is not supported (this sluice reads 1)"
    );
    assert_eq!(
        bad(r#"{"v": 1, "similarities": []}"#),
        "similarities: empty; a baseline needs at least one pair"
    );
    assert_eq!(
        bad(r#"{"v": 1, "similarities": [0.9, 1.5]}"#),
        "similarities[1]: 1.5 is not a cosine similarity (-1..=1)"
    );
}
