//! Weighted cluster choice: a random pick over a cumulative table, and a
//! sticky pick by weighted rendezvous hashing. Both tables are built once
//! when a snapshot is built; picking allocates nothing.

use crate::hash::mix64;

/// Cumulative weights for a random weighted pick.
#[derive(Clone, Debug)]
pub struct WeightedTable {
    /// `cumulative[i]` is the sum of weights `0..=i`.
    cumulative: Vec<u64>,
    total: u64,
}

impl WeightedTable {
    pub fn new(weights: &[u32]) -> Self {
        let mut total = 0u64;
        let cumulative = weights
            .iter()
            .map(|w| {
                total += u64::from(*w);
                total
            })
            .collect();
        Self { cumulative, total }
    }

    /// Sum of all weights; 0 means nothing can be picked.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Picks an index with probability proportional to its weight, from a
    /// uniformly random `r`. `None` only when every weight is 0.
    pub fn pick(&self, r: u64) -> Option<usize> {
        if self.total == 0 {
            return None;
        }
        // Multiply-shift maps r onto 0..total without the bias of a modulo.
        let point = ((u128::from(r) * u128::from(self.total)) >> 64) as u64;
        // Splits have a handful of clusters: a linear scan beats a binary search.
        self.cumulative.iter().position(|c| point < *c)
    }
}

/// Weighted rendezvous (highest random weight) hashing over named clusters.
///
/// Each cluster scores `-w / ln(u)` with `u` a uniform draw derived from the
/// session key and the cluster's name. A session keeps its cluster as long as
/// that cluster's score stays the highest, so a small weight change moves only
/// the sessions it has to, and a weight of 0 moves all of that cluster's
/// sessions (and no others).
#[derive(Clone, Debug)]
pub struct StickyTable {
    entries: Vec<(u64, f64)>,
}

impl StickyTable {
    /// `clusters`: (hash of the cluster name, weight), in split order.
    pub fn new(clusters: &[(u64, u32)]) -> Self {
        Self {
            entries: clusters.iter().map(|(h, w)| (*h, f64::from(*w))).collect(),
        }
    }

    /// The index of the cluster for the session whose key hashes to `key`.
    pub fn pick(&self, key: u64) -> Option<usize> {
        let mut best: Option<(usize, f64)> = None;
        for (i, (name_hash, weight)) in self.entries.iter().enumerate() {
            if *weight <= 0.0 {
                continue;
            }
            let score = weight / -unit_interval(mix64(key ^ name_hash)).ln();
            if best.is_none_or(|(_, b)| score > b) {
                best = Some((i, score));
            }
        }
        best.map(|(i, _)| i)
    }
}

/// Maps 64 random bits onto the open interval (0, 1).
fn unit_interval(bits: u64) -> f64 {
    ((bits >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests;
