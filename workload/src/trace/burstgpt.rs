//! The BurstGPT CSV: `Timestamp` (seconds from the trace's start), `Model`,
//! `Request tokens`, `Response tokens`, `Total tokens`, `Log Type`, and in
//! later releases `Session ID` and `Elapsed time` (seconds). Columns are
//! found by name, so every release reads.

use sluice_filters::{TraceLine, TRACE_VERSION};

use super::csv::{self, Header};
use super::{micros, seconds_text, time, whole};

pub(super) const HEADER: &str =
    "Timestamp,Session ID,Model,Request tokens,Response tokens,Total tokens,Log Type";

pub(super) struct BurstGpt {
    header: Header,
    timestamp: usize,
    request: usize,
    response: usize,
    model: Option<usize>,
    session: Option<usize>,
    total: Option<usize>,
    elapsed: Option<usize>,
}

impl BurstGpt {
    pub(super) fn new(header_line: &str) -> Result<BurstGpt, String> {
        let header = Header::new("BurstGPT", header_line)?;
        Ok(BurstGpt {
            timestamp: header.require("BurstGPT", "Timestamp")?,
            request: header.require("BurstGPT", "Request tokens")?,
            response: header.require("BurstGPT", "Response tokens")?,
            model: header.find("Model"),
            session: header.find("Session ID"),
            total: header.find("Total tokens"),
            elapsed: header.find("Elapsed time"),
            header,
        })
    }

    pub(super) fn decode(&self, text: &str, line: usize) -> Result<TraceLine, String> {
        let fields = csv::row(text, &self.header)?;
        let field = |i: Option<usize>| i.map(|i| fields[i].as_str()).filter(|f| !f.is_empty());
        let input = whole("Request tokens", &fields[self.request])?;
        let output = whole("Response tokens", &fields[self.response])?;
        if let Some(total) = field(self.total) {
            let total = whole("Total tokens", total)?;
            if total != input + output {
                return Err(format!(
                    "Total tokens: {total} is not Request tokens + Response tokens ({input} + {output})"
                ));
            }
        }
        let arrival_us = micros("Timestamp", &fields[self.timestamp])?;
        let e2e_ms = field(self.elapsed)
            .map(|e| time("Elapsed time", e).map(|s| s * 1000.0))
            .transpose()?;
        Ok(TraceLine {
            v: TRACE_VERSION,
            request_id: format!("burstgpt:{line}"),
            session_id: field(self.session).map(str::to_owned),
            model: field(self.model).map(str::to_owned),
            arrival_us,
            e2e_ms,
            input_tokens: Some(input),
            output_tokens: Some(output),
            ..TraceLine::default()
        })
    }
}

/// `Log Type` is not kept in a sluice trace: it is written as
/// `Conversation log` for a request with a session, else `API log`.
pub(super) fn encode(line: &TraceLine) -> Result<String, String> {
    let input = line
        .input_tokens
        .ok_or("no input_tokens, which BurstGPT's Request tokens needs")?;
    let output = line
        .output_tokens
        .ok_or("no output_tokens, which BurstGPT's Response tokens needs")?;
    let total = input.checked_add(output).ok_or_else(|| {
        format!(
            "input_tokens + output_tokens: {input} + {output} is more than BurstGPT's Total \
             tokens can hold"
        )
    })?;
    let session = line.session_id.as_deref().unwrap_or("");
    let log_type = if session.is_empty() {
        "API log"
    } else {
        "Conversation log"
    };
    Ok(csv::join(&[
        &seconds_text(line.arrival_us),
        session,
        line.model.as_deref().unwrap_or(""),
        &input.to_string(),
        &output.to_string(),
        &total.to_string(),
        log_type,
    ]))
}
