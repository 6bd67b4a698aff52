//! Mooncake JSONL, as in the FAST '25 traces: `{"timestamp": ms,
//! "input_length": tokens, "output_length": tokens, "hash_ids": [...]}`,
//! each hash id a block of 512 tokens of prompt, shared prefixes sharing ids.

use serde::{Deserialize, Serialize};
use sluice_filters::{json_error, TraceLine, TRACE_VERSION};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Row {
    /// A whole number of ms is read exactly (an `f64` loses µs past 2^53).
    timestamp: serde_json::Number,
    input_length: u64,
    output_length: u64,
    #[serde(default)]
    hash_ids: Vec<u64>,
}

/// Written with a whole number of milliseconds, as the published traces are.
#[derive(Serialize)]
struct Out<'a> {
    timestamp: u64,
    input_length: u64,
    output_length: u64,
    hash_ids: &'a [u64],
}

pub(super) fn decode(text: &str, line: usize) -> Result<TraceLine, String> {
    let row: Row = serde_json::from_str(text).map_err(|e| json_error(&e))?;
    let arrival_us = match (row.timestamp.as_u64(), row.timestamp.as_f64()) {
        (Some(ms), _) => ms.saturating_mul(1000),
        (None, Some(ms)) if ms.is_finite() && ms >= 0.0 => (ms * 1000.0).round() as u64,
        _ => {
            return Err(format!(
                "timestamp: {} is not a time (ms >= 0)",
                row.timestamp
            ))
        }
    };
    Ok(TraceLine {
        v: TRACE_VERSION,
        request_id: format!("mooncake:{line}"),
        arrival_us,
        input_tokens: Some(row.input_length),
        output_tokens: Some(row.output_length),
        hash_ids: row.hash_ids,
        ..TraceLine::default()
    })
}

/// Mooncake has no place for what the recorder adds (timing, sessions,
/// bodies); the arrival is rounded to the millisecond.
pub(super) fn encode(line: &TraceLine) -> Result<String, String> {
    let out = Out {
        // Saturating: u64::MAX µs is a trace's arrival too (found by the fuzzer).
        timestamp: line.arrival_us.saturating_add(500) / 1000,
        input_length: line
            .input_tokens
            .ok_or("no input_tokens, which Mooncake's input_length needs")?,
        output_length: line
            .output_tokens
            .ok_or("no output_tokens, which Mooncake's output_length needs")?,
        hash_ids: &line.hash_ids,
    };
    serde_json::to_string(&out).map_err(|e| e.to_string())
}
