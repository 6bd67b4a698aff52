#![allow(clippy::unwrap_used)]

use super::*;

fn count(sampler: &MirrorSampler, requests: u32) -> (u32, u32) {
    let mut mirrored = 0;
    let mut copies = 0;
    for _ in 0..requests {
        let c = sampler.copies(None);
        mirrored += u32::from(c > 0);
        copies += c;
    }
    (mirrored, copies)
}

#[test]
fn everything_at_100_percent_with_whole_copies() {
    let s = MirrorSampler::new(100.0, 3.0, 7);
    assert_eq!(count(&s, 100), (100, 300));
}

#[test]
fn nothing_at_0_percent() {
    let s = MirrorSampler::new(0.0, 3.0, 7);
    assert_eq!(count(&s, 1000), (0, 0));
    assert_eq!(s.copies(Some(b"session")), 0);
}

#[test]
fn ten_percent_is_ten_percent_plus_or_minus_two_for_any_seed() {
    for seed in 0..50 {
        let s = MirrorSampler::new(10.0, 1.0, seed);
        let (mirrored, _) = count(&s, 2000);
        // σ is 13 requests: the issue's ±2% is more than 3σ.
        assert!((160..=240).contains(&mirrored), "seed {seed}: {mirrored}");
    }
}

#[test]
fn each_request_draws_independently_of_the_one_before() {
    // An evenly spread sequence at 50% alternates (pairs of picks are rare);
    // independent coins pick both of two neighbours a quarter of the time.
    let s = MirrorSampler::new(50.0, 1.0, 11);
    let picks: Vec<bool> = (0..20_000).map(|_| s.copies(None) > 0).collect();
    let both = picks.windows(2).filter(|w| w[0] && w[1]).count();
    assert!((4_700..=5_300).contains(&both), "{both} of 19999 pairs");
}

#[test]
fn fractional_copies_average_out() {
    for seed in 0..50 {
        let s = MirrorSampler::new(100.0, 2.5, seed);
        let (mirrored, copies) = count(&s, 400);
        assert_eq!(mirrored, 400);
        // 2.5x +- 0.15 (σ is 10 copies).
        assert!((940..=1060).contains(&copies), "seed {seed}: {copies}");
    }
    let s = MirrorSampler::new(50.0, 0.5, 3);
    let (mirrored, copies) = count(&s, 1000);
    // Half are picked, half of those get their one (fractional) copy.
    assert!((200..=300).contains(&copies), "{mirrored} {copies}");
}

#[test]
fn sessions_are_mirrored_whole_or_not_at_all() {
    let a = MirrorSampler::new(30.0, 1.0, 1);
    let b = MirrorSampler::new(30.0, 1.0, 99);
    let mut mirrored = 0;
    for i in 0..1000 {
        let key = format!("session-{i}");
        let first = a.copies(Some(key.as_bytes()));
        for _ in 0..5 {
            assert_eq!(a.copies(Some(key.as_bytes())), first);
        }
        // The choice is the session's, not the snapshot's seed: a config
        // change keeps every session where it was.
        assert_eq!(b.copies(Some(key.as_bytes())), first);
        mirrored += first;
    }
    assert!((250..=350).contains(&mirrored), "{mirrored}");
}

#[test]
fn a_higher_percent_keeps_every_session_a_lower_one_had() {
    let low = MirrorSampler::new(10.0, 1.0, 1);
    let high = MirrorSampler::new(40.0, 1.0, 1);
    for i in 0..500 {
        let key = format!("s{i}");
        if low.copies(Some(key.as_bytes())) > 0 {
            assert!(high.copies(Some(key.as_bytes())) > 0, "{key}");
        }
    }
}

#[test]
fn robustness_is_the_perturbed_mean_over_the_noise_floor() {
    use super::metrics::robustness;
    assert_eq!(robustness(None, Some(0.9)), None);
    assert_eq!(robustness(Some(0.6), None), Some(0.6));
    let score = robustness(Some(0.6), Some(0.8)).unwrap();
    assert!((score - 0.75).abs() < 1e-12);
    // Rewording that moves answers less than asking again is as robust as it gets.
    assert_eq!(robustness(Some(0.95), Some(0.9)), Some(1.0));
    assert_eq!(robustness(Some(0.0), Some(0.0)), Some(0.0));
}

#[test]
fn the_robustness_gauge_follows_the_histograms() {
    let registry = prometheus::Registry::new();
    let m = MirrorMetrics::new(&registry).unwrap().route("chat");
    m.update_robustness();
    let text = |r: &prometheus::Registry| {
        prometheus::TextEncoder::new()
            .encode_to_string(&r.gather())
            .unwrap()
    };
    assert!(
        text(&registry).contains("sluice_mirror_robustness{route=\"chat\"} 0\n"),
        "unset until a perturbed answer"
    );
    for s in [1.0, 0.5] {
        m.noise_similarity.observe(s);
    }
    for s in [0.375, 0.375] {
        m.perturbed_similarity.observe(s);
    }
    m.update_robustness();
    // 0.375 / 0.75 = 0.5.
    assert!(text(&registry).contains("sluice_mirror_robustness{route=\"chat\"} 0.5\n"));
}
