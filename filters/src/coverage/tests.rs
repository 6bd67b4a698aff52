#![allow(clippy::unwrap_used)]

use super::*;

/// A seeded generator for the synthetic vectors (xorshift on mix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = mix64(self.0.wrapping_add(0x9e37_79b9_7f4a_7c15));
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// `k` directions in 64 dimensions: direction `i` is the basis vector `e_i`.
fn direction(i: usize) -> Vec<f32> {
    let mut v = vec![0.0f32; 64];
    v[i] = 1.0;
    v
}

/// `base` plus uniform noise of amplitude `noise` in every dimension.
fn noisy(base: &[f32], noise: f64, rng: &mut Rng) -> Vec<f32> {
    base.iter()
        .map(|x| x + ((rng.next() * 2.0 - 1.0) * noise) as f32)
        .collect()
}

#[test]
fn five_directions_with_noise_make_exactly_five_clusters() {
    let mut rng = Rng(7);
    let mut clusters = PromptClusters::new(DEFAULT_COVERAGE_SIMILARITY, DEFAULT_MAX_CLUSTERS);
    let mut assigned = vec![Vec::new(); 5];
    for n in 0..200 {
        let truth = n % 5;
        // Noise 0.05 in 64 dimensions keeps a vector within cosine ~0.95 of
        // its direction; the directions are orthogonal (cosine 0).
        let v = noisy(&direction(truth), 0.05, &mut rng);
        assigned[truth].push(clusters.assign(&v).unwrap());
    }
    assert_eq!(clusters.len(), 5);
    assert_eq!(clusters.over_cap(), 0);
    // Every vector of a true cluster went to one cluster, and no two true
    // clusters share one.
    let firsts: BTreeSet<usize> = assigned
        .iter()
        .map(|a| {
            assert!(a.iter().all(|c| *c == a[0]), "{a:?}");
            a[0]
        })
        .collect();
    assert_eq!(firsts.len(), 5);
}

#[test]
fn the_cap_is_honoured_and_later_vectors_join_their_nearest_leader() {
    let mut clusters = PromptClusters::new(0.82, 3);
    for i in 0..3 {
        assert_eq!(clusters.assign(&direction(i)), Some(i));
    }
    // A fourth direction may not lead: it joins the nearest leader. Tilted
    // towards e_1 (cosine 0.6 with it, 0 with the others), so that is e_1.
    let mut tilted = direction(3);
    tilted[1] = 0.75;
    assert_eq!(clusters.assign(&tilted), Some(1));
    assert_eq!(clusters.len(), 3);
    assert_eq!(clusters.over_cap(), 1);
}

#[test]
fn a_vector_joins_the_first_leader_close_enough_so_order_matters() {
    // a and c are 0.6 apart; b lies between them at cosine 0.894 of each.
    let a = [1.0f32, 0.0];
    let c = [0.6f32, 0.8];
    let b = [0.894_427_2f32, 0.447_213_6];
    let mut ab = PromptClusters::new(0.85, 10);
    assert_eq!(
        [ab.assign(&a), ab.assign(&b), ab.assign(&c)],
        [Some(0), Some(0), Some(1)]
    );
    // Led by b, both a and c join it: one cluster instead of two.
    let mut ba = PromptClusters::new(0.85, 10);
    assert_eq!(
        [ba.assign(&b), ba.assign(&a), ba.assign(&c)],
        [Some(0), Some(0), Some(0)]
    );
}

#[test]
fn zero_vectors_and_other_lengths_are_not_assigned() {
    let mut clusters = PromptClusters::new(0.82, 10);
    assert_eq!(clusters.assign(&[0.0, 0.0]), None);
    assert_eq!(clusters.assign(&[]), None);
    assert_eq!(clusters.assign(&[1.0, 0.0]), Some(0));
    assert_eq!(clusters.assign(&[1.0, 0.0, 0.0]), None);
    assert_eq!(clusters.len(), 1);
}

#[test]
fn coverage_is_the_canary_clusters_of_the_step_over_every_cluster_seen() {
    let mut coverage = Coverage::new(0.82, 256);
    // Step 1: stable serves directions 0..4, the canary 0 and 1.
    for i in 0..4 {
        coverage.record(&direction(i), 1, "stable");
    }
    coverage.record(&direction(0), 1, "canary");
    coverage.record(&direction(1), 1, "canary");
    coverage.record(&direction(1), 1, "canary");
    let step1 = coverage.reading(1, "canary");
    assert_eq!(
        step1,
        CoverageReading {
            touched: 2,
            seen: 4,
            prompts: 3,
            prompts_seen: 7,
        }
    );
    assert_eq!(step1.percent(), Some(50.0));
    // Step 2: the canary touches 3 of 5 (a new direction counts in both).
    for i in [0, 2, 4] {
        coverage.record(&direction(i), 2, "canary");
    }
    let step2 = coverage.reading(2, "canary");
    assert_eq!((step2.touched, step2.seen), (3, 5));
    assert_eq!(step2.percent(), Some(60.0));
    // Step 1's count stays its own; its denominator is what is seen now.
    assert_eq!(coverage.reading(1, "canary").percent(), Some(40.0));
    // Nothing seen yet: no percentage, rather than 0%.
    assert_eq!(Coverage::new(0.82, 8).reading(1, "canary").percent(), None);
}

#[test]
fn sampling_takes_about_the_rate_and_is_seeded() {
    let taken = (0..100_000)
        .filter(|n| coverage_sampled(42, *n, 0.2))
        .count();
    // Binomial(100000, 0.2): sd 126; 5 sd either side.
    assert!((19_370..=20_630).contains(&taken), "{taken}");
    let first: Vec<bool> = (0..64).map(|n| coverage_sampled(42, n, 0.5)).collect();
    let again: Vec<bool> = (0..64).map(|n| coverage_sampled(42, n, 0.5)).collect();
    let other: Vec<bool> = (0..64).map(|n| coverage_sampled(43, n, 0.5)).collect();
    assert_eq!(first, again);
    assert_ne!(first, other);
    assert!((0..100).all(|n| coverage_sampled(1, n, 1.0)));
    assert!((0..100).all(|n| !coverage_sampled(1, n, 0.0)));
}

#[test]
fn user_text_is_the_user_turns_and_prompts() {
    let chat = br#"{"messages": [{"role": "system", "content": "be brief"},
        {"role": "user", "content": "what is rust"},
        {"role": "assistant", "content": "a language"},
        {"role": "user", "content": [{"type": "text", "text": "and go?"}, {"type": "image_url"}]}]}"#;
    assert_eq!(user_text(chat).unwrap(), "what is rust\nand go?");
    assert_eq!(
        user_text(br#"{"prompt": ["one", "two"]}"#).unwrap(),
        "one\ntwo"
    );
    assert_eq!(
        user_text(br#"{"prompt": "once upon"}"#).unwrap(),
        "once upon"
    );
    assert_eq!(
        user_text(br#"{"messages": [{"role": "system", "content": "x"}]}"#),
        None
    );
    assert_eq!(user_text(b"not json"), None);
    assert_eq!(user_text(br#"{"prompt": "  "}"#), None);
}
