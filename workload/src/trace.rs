//! Trace files: read and write sluice JSONL (the recorder's schema, from
//! `sluice_filters::TraceLine`) and the public formats, Mooncake JSONL, the
//! Azure LLM inference CSV and the BurstGPT CSV; tell them apart by content;
//! and say which line of which file is wrong. Every format is read into and
//! written from a `TraceLine`, so a conversion keeps the fields both sides
//! have. A trace never loads half silently: a bad row stops the read, or,
//! with `skip_bad`, is counted and reported.

mod azure;
mod burstgpt;
mod csv;
mod mooncake;
mod prompt;
mod read;
mod stats;
mod write;

use std::fmt;

pub use prompt::{prompt_of, PromptField};
pub use read::{for_each_row, Refused, Skipped, TraceReader};
pub(crate) use stats::{dispersion, QUANTISED_ZERO_SHARE};
pub use stats::{quantised_warning, Lengths, StatsBuilder, TraceStats};
pub use write::{convert, Converted, TraceWriter, WriteError};

/// A trace format, by its `--from` / `--to` name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// sluice JSONL, `"v": 1`: what the recorder writes.
    Sluice,
    /// Mooncake JSONL: `timestamp` (ms), `input_length`, `output_length`,
    /// `hash_ids`.
    Mooncake,
    /// Azure LLM inference CSV: `TIMESTAMP,ContextTokens,GeneratedTokens`.
    Azure,
    /// BurstGPT CSV: `Timestamp, Session ID, Model, Request tokens,
    /// Response tokens, Total tokens, Log Type` (the first release has no
    /// Session ID; a later one adds `Elapsed time`).
    BurstGpt,
}

impl Format {
    pub const ALL: [Format; 4] = [
        Format::Sluice,
        Format::Mooncake,
        Format::Azure,
        Format::BurstGpt,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::Sluice => "sluice",
            Format::Mooncake => "mooncake",
            Format::Azure => "azure",
            Format::BurstGpt => "burstgpt",
        }
    }

    pub fn from_name(name: &str) -> Result<Format, String> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
                format!(
                    "unknown trace format `{name}` (one of {})",
                    names.join(", ")
                )
            })
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What is wrong, and where: `file:line: what` (`file: what` for the file
/// as a whole).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    pub file: String,
    /// 1-based; 0 for the file as a whole.
    pub line: usize,
    pub message: String,
}

impl TraceError {
    pub fn new(file: &str, line: usize, message: impl Into<String>) -> TraceError {
        TraceError {
            file: file.to_owned(),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            0 => write!(f, "{}: {}", self.file, self.message),
            n => write!(f, "{}:{n}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for TraceError {}

/// A whole number of a CSV or JSON field, with the column in the error.
fn whole(column: &str, text: &str) -> Result<u64, String> {
    text.parse::<u64>()
        .map_err(|_| format!("{column}: `{text}` is not a whole number"))
}

/// Seconds (or milliseconds) as a finite, non-negative number.
fn time(column: &str, text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(t) if t.is_finite() && t >= 0.0 => Ok(t),
        _ => Err(format!("{column}: `{text}` is not a time (a number >= 0)")),
    }
}

/// Seconds as µs, read exactly when written as a plain decimal (`12`,
/// `12.5`, what [`seconds_text`] writes): through an `f64`, µs past 2^53
/// (285 years) came back changed, so a trace converted twice differed
/// (found by the `trace` fuzzer). Other spellings (`1e3`) go through
/// [`time`]; the 7th decimal rounds.
fn micros(column: &str, text: &str) -> Result<u64, String> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !whole.is_empty() && whole.len() <= 14 && digits(whole) && digits(fraction) {
        let mut us = whole
            .parse::<u64>()
            .ok()
            .and_then(|s| s.checked_mul(1_000_000));
        for (b, scale) in fraction.bytes().zip([100_000, 10_000, 1_000, 100, 10, 1]) {
            us = us.and_then(|us| us.checked_add(u64::from(b - b'0') * scale));
        }
        if fraction.as_bytes().get(6).is_some_and(|b| *b >= b'5') {
            us = us.and_then(|us| us.checked_add(1));
        }
        if let Some(us) = us {
            return Ok(us);
        }
    }
    time(column, text).map(|s| (s * 1e6).round() as u64)
}

/// `µs` as decimal seconds, trailing zeros trimmed: `12`, `12.5`, `0.000001`.
pub(crate) fn seconds_text(us: u64) -> String {
    let (whole, frac) = (us / 1_000_000, us % 1_000_000);
    if frac == 0 {
        return whole.to_string();
    }
    let frac = format!("{frac:06}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

#[cfg(test)]
mod tests;
