use super::*;
use crate::hash::hash_bytes;

fn counts(table: &WeightedTable, n: u64) -> Vec<u64> {
    let mut out = vec![0u64; 3];
    for i in 0..n {
        if let Some(k) = table.pick(mix64(i)) {
            out[k] += 1;
        }
    }
    out
}

#[test]
fn weighted_pick_follows_weights() {
    let c = counts(&WeightedTable::new(&[70, 30, 0]), 100_000);
    assert_eq!(c[2], 0);
    assert!((69_000..71_000).contains(&c[0]), "{c:?}");
    assert!((29_000..31_000).contains(&c[1]), "{c:?}");
}

#[test]
fn all_zero_picks_nothing() {
    let t = WeightedTable::new(&[0, 0]);
    assert_eq!(t.total(), 0);
    assert_eq!(t.pick(42), None);
}

#[test]
fn extremes_of_r_stay_in_range() {
    let t = WeightedTable::new(&[1, 1]);
    assert_eq!(t.pick(0), Some(0));
    assert_eq!(t.pick(u64::MAX), Some(1));
}

fn sticky(weights: &[u32]) -> StickyTable {
    let names = ["stable", "canary", "third"];
    let pairs: Vec<(u64, u32)> = weights
        .iter()
        .enumerate()
        .map(|(i, w)| (hash_bytes(names[i].as_bytes()), *w))
        .collect();
    StickyTable::new(&pairs)
}

#[test]
fn sticky_follows_weights_and_moves_minimally() {
    let before = sticky(&[90, 10]);
    let after = sticky(&[80, 20]);
    let sessions: Vec<u64> = (0..20_000u64)
        .map(|i| hash_bytes(format!("s{i}").as_bytes()))
        .collect();
    let mut on_canary = 0;
    let mut moved = 0;
    let mut moved_to_stable = 0;
    for s in &sessions {
        let a = before.pick(*s);
        let b = after.pick(*s);
        if a == Some(1) {
            on_canary += 1;
        }
        if a != b {
            moved += 1;
            if b == Some(0) {
                moved_to_stable += 1;
            }
        }
    }
    assert!((1_700..2_300).contains(&on_canary), "{on_canary}");
    // 90/10 -> 80/20 must move about 10% of sessions, all towards the canary.
    assert!((1_500..2_500).contains(&moved), "{moved}");
    assert_eq!(moved_to_stable, 0);
}

#[test]
fn sticky_zero_weight_moves_exactly_that_clusters_sessions() {
    let before = sticky(&[50, 30, 20]);
    let after = sticky(&[50, 0, 20]);
    for i in 0..5_000u64 {
        let s = hash_bytes(format!("user-{i}").as_bytes());
        let (a, b) = (before.pick(s), after.pick(s));
        if a == Some(1) {
            assert_ne!(b, Some(1));
        } else {
            assert_eq!(a, b);
        }
    }
    assert_eq!(sticky(&[0, 0]).pick(7), None);
}
