//! Known answers: hand-computed Mann–Whitney and z-tests (the brute-force
//! pair count and the tie-corrected variance, written out), and seeded
//! synthetic samples with a known shift, or none, for the bootstrap.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, LogNormal};

use super::*;

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn mann_whitney_matches_hand_computed_answers() {
    // 1..5 against 6..10: U = 0, σ² = 25·11/12, z = (0 − 12.5 + ½)/σ.
    // R's wilcox.test(1:5, 6:10, exact = FALSE) prints W = 0, p = 0.01219.
    let m = mann_whitney(
        &Dist::from_values([1, 2, 3, 4, 5]),
        &Dist::from_values([6, 7, 8, 9, 10]),
    )
    .unwrap();
    assert_eq!(m.u, 0.0);
    assert!(close(m.z, -2.506_718_245_762_05, 1e-9), "{m:?}");
    assert!(close(m.p, 0.012_185_780_355_344_8, 1e-9), "{m:?}");
    assert_eq!(m.effect, 0.0);
    // With ties across the samples: U = 12 by counting the 42 pairs (ties
    // ½); ties {2: 3, 3: 3, 6: 2}, Σ(t³ − t) = 24 + 24 + 6 = 54.
    let m = mann_whitney(
        &Dist::from_values([1, 2, 2, 3, 4, 7]),
        &Dist::from_values([2, 3, 3, 5, 6, 6, 8]),
    )
    .unwrap();
    assert_eq!(m.u, 12.0);
    assert!(close(m.z, -1.229_581_728_623_2, 1e-9), "{m:?}");
    assert!(close(m.p, 0.218_853_775_577_114, 1e-9), "{m:?}");
}

#[test]
fn the_z_tests_match_hand_computed_answers() {
    // 45/100 against 30/100: pooled 0.375, z = 0.15 / 0.068465 = 2.19089.
    let p = two_proportions(45, 100, 30, 100).unwrap();
    assert!(close(p, 0.028_459_736_916_310_6, 1e-9), "{p}");
    // 120 events in 10 s against 100 in 10 s: z = 10 / √55.
    let p = two_rates(120, 10.0, 100, 10.0).unwrap();
    assert!(close(p, 0.177_529_852_412_153_5, 1e-9), "{p}");
    assert_eq!(two_proportions(0, 0, 1, 2), None);
}

fn lognormal(n: usize, scale: f64, rng: &mut StdRng) -> Dist {
    // Median 50 ms (in µs), σ 0.5, the run's times `scale` times longer.
    let d = LogNormal::new((50_000.0_f64).ln(), 0.5).unwrap();
    Dist::from_values((0..n).map(|_| (d.sample(rng) * scale).round() as u64))
}

#[test]
fn the_bootstrap_finds_a_known_shift_and_holds_its_level_without_one() {
    let mut rng = StdRng::seed_from_u64(7);
    // 30% slower: the true p99 difference is 0.3 · 50 ms · e^(2.3263·0.5).
    let truth = 0.3 * 50_000.0 * (2.326_348 * 0.5_f64).exp();
    let base = lognormal(2000, 1.0, &mut rng);
    let run = lognormal(2000, 1.3, &mut rng);
    let ci = bootstrap_quantile_diff(&run, &base, 0.99, RESAMPLES, SEED).unwrap();
    assert!(ci.excludes_zero() && ci.low > 0.0, "{ci:?}");
    assert!(ci.low < truth && truth < ci.high, "{ci:?} against {truth}");
    // The same seed gives the same interval.
    assert_eq!(
        bootstrap_quantile_diff(&run, &base, 0.99, RESAMPLES, SEED),
        Some(ci)
    );
    // The median of a 10% shift on 2000 samples each (5 standard errors) is
    // found too.
    let run = lognormal(2000, 1.10, &mut rng);
    let ci = bootstrap_quantile_diff(&run, &base, 0.5, RESAMPLES, SEED).unwrap();
    assert!(ci.low > 0.0, "{ci:?}");
    // No shift: at a 95% level, about 5% of pairs are flagged. Of 40
    // pairs, 2 are expected; more than 6 has a chance under 0.3%.
    let mut flagged = 0;
    for trial in 0..40 {
        let a = lognormal(400, 1.0, &mut rng);
        let b = lognormal(400, 1.0, &mut rng);
        let ci = bootstrap_quantile_diff(&a, &b, 0.9, 200, SEED + trial).unwrap();
        flagged += u32::from(ci.excludes_zero());
    }
    assert!(flagged <= 6, "{flagged} of 40 flagged with no shift");
}

#[test]
fn mann_whitney_finds_a_known_shift_and_holds_its_level_without_one() {
    let mut rng = StdRng::seed_from_u64(11);
    let base = lognormal(500, 1.0, &mut rng);
    let run = lognormal(500, 1.1, &mut rng);
    let m = mann_whitney(&run, &base).unwrap();
    assert!(m.p < 1e-3 && m.effect > 0.5, "{m:?}");
    // 200 pairs of one distribution: 10 expected below 0.05; more than 18
    // has a chance under 1%.
    let mut flagged = 0;
    for _ in 0..200 {
        let a = lognormal(200, 1.0, &mut rng);
        let b = lognormal(200, 1.0, &mut rng);
        flagged += u32::from(mann_whitney(&a, &b).unwrap().p < 1.0 - LEVEL);
    }
    assert!(flagged <= 18, "{flagged} of 200 flagged with no shift");
}

#[test]
fn quantiles_read_like_hdr_histograms() {
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    let d = LogNormal::new(10.0_f64, 1.0).unwrap();
    for _ in 0..5000 {
        h.record(d.sample(&mut rng).round().max(1.0) as u64)
            .unwrap();
    }
    let mut bytes = Vec::new();
    hdrhistogram::serialization::Serializer::serialize(
        &mut hdrhistogram::serialization::V2Serializer::new(),
        &h,
        &mut bytes,
    )
    .unwrap();
    use base64::Engine as _;
    let text = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let g = super::super::input::group(
        &serde_json::json!({"requests": 1, "completed": 1, "failed": 0,
            "histograms": {"e2el_us": text}}),
        "summary.",
    )
    .unwrap();
    let dist = &g.dists["e2el"];
    assert_eq!(dist.total, 5000);
    for q in [0.5, 0.9, 0.95, 0.99, 0.999] {
        assert_eq!(dist.quantile(q), Some(h.value_at_quantile(q)), "q {q}");
    }
}
