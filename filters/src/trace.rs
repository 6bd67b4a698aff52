//! The trace schema: one JSON line per request, `"v": 1`, flat, written by
//! the recorder and read by the load-testing half (`sluice trace`, the
//! fitter, the replay). The field names are the ones `workload` reads and
//! writes in every format: `input_tokens`, `ttft_ms`, `session_id`,
//! `think_time_ms`, ...
//!
//! Pure: the recorder passes in the finished [`RequestRecord`], the arrival
//! time it read from its clock, the wall clock, the body and the
//! [`Redactor`]; [`TraceLine::from_record`] builds the line.

mod prompt;
mod sessions;
mod time;

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_with::skip_serializing_none;

use crate::record::RequestRecord;
use crate::redact::Redactor;

pub use prompt::{hash_ids, PromptShape, HASH_BLOCK_BYTES};
pub use sessions::ThinkTimes;
pub use time::{format_rfc3339, parse_wall_clock};

/// The schema version this crate writes and reads.
pub const TRACE_VERSION: u32 = 1;

/// One request of a trace. Optional fields are absent from the line when
/// unknown (a trace converted from a public format has no route, no TTFT).
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceLine {
    pub v: u32,
    pub request_id: String,
    pub trace_id: Option<String>,
    pub session_id: Option<String>,
    /// The `sluice load` run that sent the request (its `x-sluice-load`
    /// mark, from a trusted peer); absent for users' traffic.
    pub load_run: Option<String>,
    pub route: Option<String>,
    pub cluster: Option<String>,
    pub version: Option<String>,
    /// The lineage id of that cluster version (see `lineage`); absent in
    /// lines written before it, and in traces from elsewhere: unknown.
    pub lineage_id: Option<String>,
    pub model: Option<String>,
    /// `gen_ai.operation.name`: chat, text_completion, embeddings, other.
    pub operation: Option<String>,
    pub method: Option<String>,
    pub path: Option<String>,
    /// Microseconds from the start of the recording to the request's arrival.
    pub arrival_us: u64,
    /// The arrival's wall-clock time, RFC 3339 in UTC with microseconds.
    pub arrival: Option<String>,
    /// The status the client got; 0 when no answer reached it.
    pub status: Option<u16>,
    pub finish_reason: Option<String>,
    /// The stream ended the way its dialect ends (`[DONE]`, `message_stop`).
    pub clean_end: Option<bool>,
    pub ttft_ms: Option<f64>,
    /// Every gap between content chunks, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gaps_ms: Vec<f64>,
    pub e2e_ms: Option<f64>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// `input_tokens` is an estimate (characters / 4), not the server's usage.
    #[serde(default)]
    pub input_tokens_estimated: bool,
    /// `output_tokens` is the count of content chunks, not the server's usage.
    #[serde(default)]
    pub output_tokens_estimated: bool,
    /// The proxy's prompt fingerprint (SHA-256 of prompt, model, temperature).
    pub prompt_fingerprint: Option<String>,
    /// Keyed rolling hashes of the prompt's blocks of [`HASH_BLOCK_BYTES`],
    /// as Mooncake's `hash_ids`: two prompts share a prefix of ids exactly as
    /// far as they share whole blocks of text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hash_ids: Vec<u64>,
    /// For chat: the number of messages.
    pub messages: Option<u32>,
    /// Within a session: from the end of the previous answer to this arrival.
    pub think_time_ms: Option<f64>,
    /// The request body, redacted unless the recorder was told otherwise.
    pub body: Option<Body>,
    /// A gRPC call's method, `package.Service/Method` (`unknown` for a path
    /// that is not one); absent for other requests, and in lines written
    /// before it existed.
    pub grpc_method: Option<String>,
    /// A gRPC call's `grpc-status` (the upstream's or sluice's own error's);
    /// absent when unknown: not a gRPC call, or a call that ended without one.
    pub grpc_status: Option<u32>,
    /// The KV-cache usage (0..1) of the endpoint that served the request,
    /// as the upstream scrape last read it; absent when unknown, and in
    /// lines written before it existed.
    pub kvcache_ratio: Option<f64>,
}

/// A body kept in the line as JSON, not as an escaped string.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Body(pub Box<RawValue>);

impl PartialEq for Body {
    fn eq(&self, other: &Body) -> bool {
        self.0.get() == other.0.get()
    }
}

/// `recorder.bodies`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Bodies {
    None,
    #[default]
    Redacted,
    /// Refused by the config unless `allow_unredacted: true`.
    Full,
}

/// What the recorder knows about a request beyond its [`RequestRecord`].
#[derive(Clone, Copy, Debug)]
pub struct TraceInput<'a> {
    pub record: &'a RequestRecord<'a>,
    /// From the start of the recording to the request's arrival.
    pub arrival: Duration,
    /// The arrival's wall clock, microseconds since the Unix epoch.
    pub wall_unix_us: i64,
    pub trace_id: Option<&'a str>,
    /// The value of the session header, as sent.
    pub session_id: Option<&'a str>,
    /// The lineage id of the cluster version that served it.
    pub lineage_id: Option<&'a str>,
    /// From [`ThinkTimes::observe`].
    pub think_time: Option<Duration>,
    /// The request body as the proxy read it (at most its first 64 KiB).
    pub body: Option<&'a [u8]>,
    pub bodies: Bodies,
}

impl TraceLine {
    /// The line of one finished request. The session id and the path go
    /// through the redactor too (a session header may hold an email, a query
    /// an API key). The prompt's block hashes are keyed by the redactor's
    /// secret. Without usage from the server, `input_tokens` is estimated
    /// from the prompt's characters. A body that is not JSON (or was cut at
    /// 64 KiB) is not kept: it could not be redacted key by key.
    pub fn from_record(input: &TraceInput<'_>, redactor: &Redactor) -> TraceLine {
        let record = input.record;
        let shape = input.body.map(PromptShape::of).unwrap_or_default();
        let summary = record.tokens.map(|t| &t.summary);
        let (input_tokens, input_tokens_estimated) = match summary.and_then(|s| s.input_tokens) {
            Some(n) => (Some(n), false),
            None if shape.chars > 0 => (Some(shape.chars.div_ceil(4) as u64), true),
            None => (None, false),
        };
        let body = match input.bodies {
            Bodies::None => None,
            Bodies::Redacted => input.body.and_then(|b| redactor.redact_json(b).ok()),
            Bodies::Full => input
                .body
                .filter(|b| serde_json::from_slice::<serde::de::IgnoredAny>(b).is_ok())
                .map(<[u8]>::to_vec),
        };
        TraceLine {
            v: TRACE_VERSION,
            request_id: record.request_id.to_owned(),
            trace_id: input.trace_id.map(str::to_owned),
            session_id: input
                .session_id
                .map(|s| redactor.redact_str(s).into_owned()),
            load_run: record.load_run.map(str::to_owned),
            route: Some(record.route.to_owned()),
            cluster: Some(record.cluster.to_owned()),
            version: Some(record.version.to_owned()),
            lineage_id: input.lineage_id.map(str::to_owned),
            model: Some(record.model.to_owned()),
            operation: Some(record.operation.as_str().to_owned()),
            method: Some(record.method.to_owned()),
            path: Some(redactor.redact_str(record.path).into_owned()),
            arrival_us: micros(input.arrival),
            arrival: Some(format_rfc3339(input.wall_unix_us)),
            status: Some(record.status),
            finish_reason: summary.and_then(|s| s.finish_reason.clone()),
            clean_end: summary.map(|s| s.clean_end),
            ttft_ms: record.tokens.and_then(|t| t.ttft()).map(millis),
            gaps_ms: record
                .tokens
                .map(|t| t.gaps.iter().copied().map(millis).collect())
                .unwrap_or_default(),
            e2e_ms: Some(millis(record.e2e)),
            input_tokens,
            output_tokens: summary.and_then(|s| s.output_tokens),
            input_tokens_estimated,
            output_tokens_estimated: summary.is_some_and(|s| s.output_tokens_estimated),
            prompt_fingerprint: record.prompt_fingerprint.map(str::to_owned),
            hash_ids: shape
                .text
                .as_deref()
                .map_or_else(Vec::new, |text| hash_ids(text, redactor.secret())),
            messages: shape.messages,
            think_time_ms: input.think_time.map(millis),
            body: body
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|b| RawValue::from_string(b).ok())
                .map(Body),
            grpc_method: record.grpc_method.map(str::to_owned),
            grpc_status: record.grpc_status,
            kvcache_ratio: record.kvcache_ratio,
        }
    }

    /// The line as JSON, without the newline.
    pub fn to_json(&self) -> String {
        // Every field serialises (strings, numbers, bools, raw JSON).
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Checks what serde cannot: the version, times that are finite and not
    /// negative, and a wall clock that parses.
    fn check(&self) -> Result<(), String> {
        if self.v != TRACE_VERSION {
            return Err(format!(
                "unsupported trace version {} (this sluice reads {TRACE_VERSION})",
                self.v
            ));
        }
        let times = [
            ("ttft_ms", self.ttft_ms),
            ("e2e_ms", self.e2e_ms),
            ("think_time_ms", self.think_time_ms),
        ];
        for (name, value) in times {
            if let Some(ms) = value.filter(|ms| !ms.is_finite() || *ms < 0.0) {
                return Err(format!("{name}: {ms} is not a time (ms >= 0)"));
            }
        }
        if let Some((i, ms)) = self
            .gaps_ms
            .iter()
            .enumerate()
            .find(|(_, ms)| !ms.is_finite() || **ms < 0.0)
        {
            return Err(format!("gaps_ms[{i}]: {ms} is not a time (ms >= 0)"));
        }
        if let Some(r) = self
            .kvcache_ratio
            .filter(|r| !(r.is_finite() && (0.0..=1.0).contains(r)))
        {
            return Err(format!("kvcache_ratio: {r} is not a ratio (0..=1)"));
        }
        if let Some(wall) = &self.arrival {
            parse_wall_clock(wall).map_err(|e| format!("arrival: {e}"))?;
        }
        Ok(())
    }
}

/// Microseconds, saturating (585 000 years).
fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Milliseconds with microsecond precision: `12.345`.
fn millis(d: Duration) -> f64 {
    micros(d) as f64 / 1000.0
}

/// A line of a trace that could not be read: `line N: what is wrong`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineError {
    /// 1-based.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for LineError {}

/// Reads one line of a sluice trace. The message says what is wrong, with
/// the column for a JSON error (`column 12: unknown field ...`).
pub fn parse_line(text: &str) -> Result<TraceLine, String> {
    let line: TraceLine = serde_json::from_str(text).map_err(|e| json_error(&e))?;
    line.check()?;
    Ok(line)
}

/// A JSON error of one line, as `column C: what`: serde_json appends
/// " at line 1 column C", and the line is the caller's to say.
pub fn json_error(e: &serde_json::Error) -> String {
    let message = e.to_string();
    let message = match message.rfind(" at line ") {
        Some(at) => &message[..at],
        None => &message,
    };
    format!("column {}: {message}", e.column())
}

/// Every line of a trace's text, blank lines skipped, each read or its error.
pub fn parse_lines(text: &str) -> impl Iterator<Item = Result<TraceLine, LineError>> + '_ {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            parse_line(line).map_err(|message| LineError {
                line: i + 1,
                message,
            })
        })
}

#[cfg(test)]
mod tests;
