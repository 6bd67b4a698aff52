//! Comparing a shadow's answer with the primary's: status class, latency and
//! TTFT ratios, output token delta, text similarity for LLM answers,
//! recall@k of the ids a JSON pointer selects, and for gRPC calls the
//! `grpc-status` and a unary answer's message bytes. Pure: the caller passes each
//! leg's figures and (bounded) answer bytes.

mod ids;
mod text;

pub use ids::{ids_at, recall_at_k};
pub use text::{answer_text, similarity};

use std::time::Duration;

use crate::metrics::StatusClass;

/// One side of a comparison: what an answer was.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Leg {
    /// 0 when no answer came.
    pub status: u16,
    pub latency: Duration,
    pub ttft: Option<Duration>,
    pub output_tokens: Option<u64>,
    /// The answer's text (LLM answers), when it could be read.
    pub text: Option<String>,
    /// The ids `compare.ids` selected, when configured and the answer is JSON.
    pub ids: Option<Vec<String>>,
    /// A gRPC call's `grpc-status` (from its trailers or a trailers-only head).
    pub grpc_status: Option<u32>,
    /// A unary gRPC answer's message bytes, fingerprinted ([`fingerprint`]).
    pub message: Option<String>,
}

/// How a shadow answer differs from the primary's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    pub same_status_class: bool,
    pub latency_ratio: Option<f64>,
    pub ttft_ratio: Option<f64>,
    /// Shadow output tokens minus the primary's.
    pub output_token_delta: Option<i64>,
    /// 1.0 = the same words; `None` unless both answers had text.
    pub similarity: Option<f64>,
    /// `None` unless both answers had ids.
    pub recall: Option<f64>,
    /// The calls ended with different `grpc-status` codes.
    pub grpc_status_differs: bool,
    /// `None` unless both were unary gRPC answers.
    pub message_differs: Option<bool>,
}

/// Compares `other` (a shadow or noise copy) with `primary`.
pub fn compare(primary: &Leg, other: &Leg) -> Comparison {
    Comparison {
        same_status_class: StatusClass::of(primary.status) == StatusClass::of(other.status)
            && (primary.status == 0) == (other.status == 0),
        latency_ratio: ratio(other.latency, primary.latency),
        ttft_ratio: primary.ttft.zip(other.ttft).and_then(|(p, o)| ratio(o, p)),
        output_token_delta: primary
            .output_tokens
            .zip(other.output_tokens)
            .map(|(p, o)| o as i64 - p as i64),
        similarity: primary
            .text
            .as_deref()
            .zip(other.text.as_deref())
            .map(|(p, o)| similarity(p, o)),
        recall: primary
            .ids
            .as_deref()
            .zip(other.ids.as_deref())
            .map(|(p, o)| recall_at_k(p, o)),
        grpc_status_differs: primary.grpc_status != other.grpc_status,
        message_differs: primary
            .message
            .as_deref()
            .zip(other.message.as_deref())
            .map(|(p, o)| p != o),
    }
}

fn ratio(num: Duration, den: Duration) -> Option<f64> {
    let den = den.as_secs_f64();
    (den > 0.0).then(|| num.as_secs_f64() / den)
}

/// How much two identical calls to the primary's own cluster differed: the
/// worst of the noise copies. A shadow difference counts only beyond it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NoiseFloor {
    /// The lowest similarity among noise copies (1.0 without any).
    pub similarity: f64,
    pub recall: f64,
    /// Some noise copy's status class differed from the primary's.
    pub status_flaps: bool,
    /// Some noise copy's `grpc-status` differed from the primary's.
    pub grpc_status_flaps: bool,
    /// Some noise copy's unary gRPC message differed from the primary's.
    pub message_flaps: bool,
}

impl Default for NoiseFloor {
    fn default() -> Self {
        NoiseFloor {
            similarity: 1.0,
            recall: 1.0,
            status_flaps: false,
            grpc_status_flaps: false,
            message_flaps: false,
        }
    }
}

impl NoiseFloor {
    pub fn from_noise<'a>(noise: impl IntoIterator<Item = &'a Comparison>) -> NoiseFloor {
        let mut floor = NoiseFloor::default();
        for c in noise {
            if let Some(s) = c.similarity {
                floor.similarity = floor.similarity.min(s);
            }
            if let Some(r) = c.recall {
                floor.recall = floor.recall.min(r);
            }
            floor.status_flaps |= !c.same_status_class;
            floor.grpc_status_flaps |= c.grpc_status_differs;
            floor.message_flaps |= c.message_differs == Some(true);
        }
        floor
    }
}

/// Floating-point slack: two equal measures never count as a difference.
const EPSILON: f64 = 1e-9;

/// The kinds in which `shadow` differs beyond the noise floor: `status`,
/// `text` (similarity below both `min_similarity` and the noise floor),
/// `ids` (recall below the noise floor), `grpc_status` and `message` (a
/// unary gRPC answer's bytes), each unless the noise copies flapped the
/// same way. Empty = no difference.
pub fn differences(
    shadow: &Comparison,
    noise: &NoiseFloor,
    min_similarity: f64,
) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    if !shadow.same_status_class && !noise.status_flaps {
        kinds.push("status");
    }
    if let Some(s) = shadow.similarity {
        if s < min_similarity.min(noise.similarity) - EPSILON {
            kinds.push("text");
        }
    }
    if let Some(r) = shadow.recall {
        if r < noise.recall - EPSILON {
            kinds.push("ids");
        }
    }
    if shadow.grpc_status_differs && !noise.grpc_status_flaps {
        kinds.push("grpc_status");
    }
    if shadow.message_differs == Some(true) && !noise.message_flaps {
        kinds.push("message");
    }
    kinds
}

/// A stable 16-hex-digit fingerprint of bytes, for redacted diffs.
pub fn fingerprint(chunks: &[impl AsRef<[u8]>]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for chunk in chunks {
        for b in chunk.as_ref() {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{:016x}", crate::hash::mix64(h))
}

#[cfg(test)]
mod tests;
