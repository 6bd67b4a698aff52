//! Answer-level signals from embeddings: cosine similarity, the drift of a
//! window of similarities from a baseline window (KL divergence), and the
//! dispersion of several answers to one prompt. Pure: callers pass vectors
//! and similarities in.

mod baseline;
#[cfg(test)]
mod tests;

pub use baseline::{SavedBaseline, BASELINE_VERSION};

/// Cosine similarity of two vectors, in -1..=1; `None` when their lengths
/// differ, either is empty or either has zero norm.
pub fn cosine(a: &[f32], b: &[f32]) -> Option<f64> {
    if a.len() != b.len() || a.is_empty() {
        return None;
    }
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return None;
    }
    Some((dot / (na.sqrt() * nb.sqrt())).clamp(-1.0, 1.0))
}

/// Bins of the similarity histograms the KL divergence compares: 20 of
/// width 0.05 over 0..=1 (a similarity below 0 counts in the first).
pub const KL_BINS: usize = 20;
/// Pseudo-count added to every bin of both histograms (Jeffreys' prior), so
/// that a bin empty in the baseline gives a finite divergence.
const PSEUDO_COUNT: f64 = 0.5;

fn bin(similarity: f64) -> usize {
    ((similarity.clamp(0.0, 1.0) * KL_BINS as f64) as usize).min(KL_BINS - 1)
}

/// `KL(P ‖ Q) = Σ p_i · ln(p_i / q_i)` in nats, where `P` is the window's
/// and `Q` the baseline's similarities, each binned into [`KL_BINS`] bins
/// with [`PSEUDO_COUNT`] added to every bin. 0 when the two histograms are
/// the same; it grows as the window's mass moves to where the baseline had
/// little.
pub fn similarity_kl(window: &[f64], baseline: &[f64]) -> f64 {
    let histogram = |values: &[f64]| {
        let mut counts = [PSEUDO_COUNT; KL_BINS];
        for v in values {
            counts[bin(*v)] += 1.0;
        }
        let total: f64 = counts.iter().sum();
        counts.map(|c| c / total)
    };
    let (p, q) = (histogram(window), histogram(baseline));
    p.iter().zip(&q).map(|(p, q)| p * (p / q).ln()).sum()
}

/// The `q`-quantile (0..=1) of `values` by the nearest-rank method; `None`
/// when there are none.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize).max(1);
    sorted.get(rank - 1).copied()
}

/// Drift of a route's primary-vs-shadow answer similarity: the first
/// `size` pairs are the baseline (or a saved one, given whole); after them,
/// the last `size` pairs are the window compared with it.
#[derive(Clone, Debug)]
pub struct DriftWindow {
    size: usize,
    baseline: Vec<f64>,
    /// The baseline came from a file: it is whole from the start, and its
    /// pairs are not this mirror's, so no reading is made from them.
    saved: bool,
    window: std::collections::VecDeque<f64>,
}

/// Where the drift stands after a pair.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DriftReading {
    /// `None` until the baseline is full and the window has `size` pairs.
    pub kl: Option<f64>,
    /// The 10th percentile of the last `size` pairs (the baseline's last
    /// pairs stand in while the window fills).
    pub p10: Option<f64>,
    /// The pairs `p10` is read from: `size` once that many were scored.
    pub pairs: usize,
}

impl DriftWindow {
    pub fn new(size: usize) -> DriftWindow {
        DriftWindow {
            size: size.max(1),
            baseline: Vec::new(),
            saved: false,
            window: std::collections::VecDeque::new(),
        }
    }

    /// A window compared with a saved baseline from its first pairs on.
    pub fn with_baseline(size: usize, baseline: Vec<f64>) -> DriftWindow {
        DriftWindow {
            saved: true,
            baseline,
            ..DriftWindow::new(size)
        }
    }

    /// The baseline once it is whole (a saved one always is); `None` while
    /// the first `size` pairs are still coming.
    pub fn baseline(&self) -> Option<&[f64]> {
        (self.saved || self.baseline.len() == self.size).then_some(&self.baseline[..])
    }

    /// The baseline's pairs so far and the number it needs.
    pub fn baseline_progress(&self) -> (usize, usize) {
        (self.baseline.len(), self.size)
    }

    pub fn push(&mut self, similarity: f64) -> DriftReading {
        if !self.saved && self.baseline.len() < self.size {
            self.baseline.push(similarity);
        } else {
            if self.window.len() == self.size {
                self.window.pop_front();
            }
            self.window.push_back(similarity);
        }
        self.reading()
    }

    /// The reading as of the last pair.
    pub fn reading(&self) -> DriftReading {
        // The last `size` pairs: the window, topped up from the baseline's
        // tail while it fills, so the percentile reads on across the switch
        // (not from a saved baseline: those pairs are another run's).
        let from_baseline = match self.saved {
            true => 0,
            false => self.size - self.window.len(),
        };
        let start = self.baseline.len().saturating_sub(from_baseline);
        let recent: Vec<f64> = self.baseline[start..]
            .iter()
            .chain(&self.window)
            .copied()
            .collect();
        let window: Vec<f64> = self.window.iter().copied().collect();
        DriftReading {
            kl: (window.len() == self.size).then(|| similarity_kl(&window, &self.baseline)),
            p10: quantile(&recent, 0.1),
            pairs: recent.len(),
        }
    }
}

/// The last `size` values of a per-prompt figure (answer dispersion), for
/// a gate that reads their mean.
#[derive(Clone, Debug)]
pub struct RecentValues {
    size: usize,
    values: std::collections::VecDeque<f64>,
}

impl RecentValues {
    pub fn new(size: usize) -> RecentValues {
        RecentValues {
            size: size.max(1),
            values: std::collections::VecDeque::new(),
        }
    }

    pub fn push(&mut self, value: f64) {
        if self.values.len() == self.size {
            self.values.pop_front();
        }
        self.values.push_back(value);
    }

    /// The mean of the values kept; `None` when there are none.
    pub fn mean(&self) -> Option<f64> {
        (!self.values.is_empty())
            .then(|| self.values.iter().sum::<f64>() / self.values.len() as f64)
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// How far several answers to one prompt spread, from their embeddings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dispersion {
    /// The variance of each answer's cosine similarity to the centroid.
    pub centroid_variance: f64,
    /// The mean cosine similarity over all pairs of answers.
    pub mean_pairwise: f64,
}

/// The dispersion of `vectors` (two or more of one length); `None` otherwise.
pub fn dispersion(vectors: &[Vec<f32>]) -> Option<Dispersion> {
    let dim = vectors.first()?.len();
    if vectors.len() < 2 || vectors.iter().any(|v| v.len() != dim) {
        return None;
    }
    let mut centroid = vec![0.0f32; dim];
    for v in vectors {
        // Unit vectors, so each answer weighs the same in the centroid.
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm == 0.0 {
            return None;
        }
        for (c, x) in centroid.iter_mut().zip(v) {
            *c += x / norm;
        }
    }
    let to_centroid: Vec<f64> = vectors
        .iter()
        .map(|v| cosine(v, &centroid))
        .collect::<Option<_>>()?;
    let n = to_centroid.len() as f64;
    let mean = to_centroid.iter().sum::<f64>() / n;
    let centroid_variance = to_centroid.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / n;
    let mut pairs = Vec::new();
    for (i, a) in vectors.iter().enumerate() {
        for b in &vectors[i + 1..] {
            pairs.push(cosine(a, b)?);
        }
    }
    Some(Dispersion {
        centroid_variance,
        mean_pairwise: pairs.iter().sum::<f64>() / pairs.len() as f64,
    })
}
