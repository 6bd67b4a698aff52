//! The most recent shadow answers that differed from the primary's: a
//! bounded ring written by the shadow sender (never by the request path)
//! and read by `GET /v1/mirror/diffs`.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde::Serialize;
use serde_with::skip_serializing_none;

pub const DIFF_CAPACITY: usize = 256;

/// One side of a differing pair. Without `compare.keep_text` only lengths
/// and fingerprints describe the answer.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize)]
pub struct DiffLeg {
    pub cluster: String,
    /// 0 when no answer came.
    pub status: u16,
    /// A gRPC call's `grpc-status`.
    pub grpc_status: Option<u32>,
    pub latency_ms: f64,
    pub ttft_ms: Option<f64>,
    pub output_tokens: Option<u64>,
    pub bytes: usize,
    pub fingerprint: String,
    /// How many ids `compare.ids` found.
    pub ids_count: Option<usize>,
    pub text: Option<String>,
    pub ids: Option<Vec<String>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, Serialize)]
pub struct DiffRecord {
    /// Rises by one per recorded pair.
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub time_ms: u64,
    pub route: String,
    pub request_id: String,
    pub method: String,
    pub path: String,
    /// The shadow copy's index (`x-sluice-shadow`).
    pub copy: u32,
    /// `status`, `text`, `ids`: what differed beyond the noise floor.
    pub kinds: Vec<&'static str>,
    pub similarity: Option<f64>,
    /// Cosine similarity of the two answers' embeddings
    /// (`compare.embeddings`), set when the embedder has answered.
    pub embedding_similarity: Option<f64>,
    pub recall: Option<f64>,
    pub latency_ratio: Option<f64>,
    pub ttft_ratio: Option<f64>,
    pub output_token_delta: Option<i64>,
    /// The worst similarity and recall among noise copies (only with `noise_copies`).
    pub noise_similarity: Option<f64>,
    pub noise_recall: Option<f64>,
    pub request_bytes: usize,
    pub request_fingerprint: String,
    /// The request body, only with `compare.keep_text` (and cut to 4 KiB).
    pub request_text: Option<String>,
    pub primary: DiffLeg,
    pub shadow: DiffLeg,
}

#[derive(Default)]
pub struct MirrorDiffs {
    inner: Mutex<(u64, VecDeque<DiffRecord>)>,
}

impl MirrorDiffs {
    /// Keeps `record`; its `seq`, to attach what is learnt later by.
    pub fn push(&self, mut record: DiffRecord) -> u64 {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (seq, ring) = &mut *guard;
        *seq += 1;
        record.seq = *seq;
        if ring.len() == DIFF_CAPACITY {
            ring.pop_front();
        }
        ring.push_back(record);
        *seq
    }

    /// Sets the embedding similarity of the pair kept as `seq`, if it is
    /// still kept (the embedder answers after the pair is recorded).
    pub fn set_embedding_similarity(&self, seq: u64, similarity: f64) {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let ring = &mut guard.1;
        // Sequence numbers rise by one along the ring.
        let Some(first) = ring.front().map(|r| r.seq) else {
            return;
        };
        let Some(record) = seq
            .checked_sub(first)
            .and_then(|i| ring.get_mut(i as usize))
        else {
            return;
        };
        if record.seq == seq {
            record.embedding_similarity = Some(similarity);
        }
    }

    /// Kept pairs, newest first, and how many were ever recorded.
    pub fn list(&self) -> (Vec<DiffRecord>, u64) {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        (guard.1.iter().rev().cloned().collect(), guard.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_within_capacity() {
        let diffs = MirrorDiffs::default();
        for i in 0..(DIFF_CAPACITY + 10) {
            diffs.push(DiffRecord {
                request_id: i.to_string(),
                ..DiffRecord::default()
            });
        }
        let (list, total) = diffs.list();
        assert_eq!(total, (DIFF_CAPACITY + 10) as u64);
        assert_eq!(list.len(), DIFF_CAPACITY);
        assert_eq!(list[0].request_id, (DIFF_CAPACITY + 9).to_string());
        assert_eq!(list[0].seq, (DIFF_CAPACITY + 10) as u64);
        assert_eq!(list[DIFF_CAPACITY - 1].request_id, "10");
    }

    #[test]
    fn the_embedding_similarity_lands_on_its_pair_while_it_is_kept() {
        let diffs = MirrorDiffs::default();
        let first = diffs.push(DiffRecord::default());
        let seqs: Vec<u64> = (0..DIFF_CAPACITY)
            .map(|_| diffs.push(DiffRecord::default()))
            .collect();
        // The first pair has left the ring: nothing to set.
        diffs.set_embedding_similarity(first, 0.5);
        diffs.set_embedding_similarity(seqs[3], 0.75);
        diffs.set_embedding_similarity(seqs[DIFF_CAPACITY - 1] + 1, 0.25);
        let (list, _) = diffs.list();
        let set: Vec<(u64, f64)> = list
            .iter()
            .filter_map(|r| Some((r.seq, r.embedding_similarity?)))
            .collect();
        assert_eq!(set, vec![(seqs[3], 0.75)]);
    }
}
