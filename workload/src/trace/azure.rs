//! The Azure LLM inference trace CSV (2023 and 2024 releases):
//! `TIMESTAMP,ContextTokens,GeneratedTokens`, the timestamp a wall clock
//! such as `2023-11-16 18:15:46.6805900`. Arrivals are taken from the first
//! row's time; the rows must be in time order.

use sluice_filters::{format_rfc3339, parse_wall_clock, TraceLine, TRACE_VERSION};

use super::csv::{self, Header};
use super::whole;

pub(super) const HEADER: &str = "TIMESTAMP,ContextTokens,GeneratedTokens";

/// `0000-01-01T00:00:00Z` and `9999-12-31T23:59:59.999999Z`, µs since the epoch.
const FIRST_US: i64 = -62_167_219_200_000_000;
const LAST_US: i64 = 253_402_300_799_999_999;

pub(super) struct Azure {
    header: Header,
    timestamp: usize,
    context: usize,
    generated: usize,
    /// The first row's time, µs since the epoch.
    start: Option<i64>,
}

impl Azure {
    pub(super) fn new(header_line: &str) -> Result<Azure, String> {
        let header = Header::new("Azure", header_line)?;
        Ok(Azure {
            timestamp: header.require("Azure", "TIMESTAMP")?,
            context: header.require("Azure", "ContextTokens")?,
            generated: header.require("Azure", "GeneratedTokens")?,
            header,
            start: None,
        })
    }

    pub(super) fn decode(&mut self, text: &str, line: usize) -> Result<TraceLine, String> {
        let fields = csv::row(text, &self.header)?;
        let stamp = &fields[self.timestamp];
        let at = parse_wall_clock(stamp).map_err(|e| format!("TIMESTAMP: {e}"))?;
        let start = *self.start.get_or_insert(at);
        let since = u64::try_from(at - start).map_err(|_| {
            format!(
                "TIMESTAMP: `{stamp}` is before the first row's ({}): the rows must be in time order",
                format_rfc3339(start)
            )
        })?;
        Ok(TraceLine {
            v: TRACE_VERSION,
            request_id: format!("azure:{line}"),
            arrival_us: since,
            arrival: Some(format_rfc3339(at)),
            input_tokens: Some(whole("ContextTokens", &fields[self.context])?),
            output_tokens: Some(whole("GeneratedTokens", &fields[self.generated])?),
            ..TraceLine::default()
        })
    }
}

/// The wall clock of the line (`arrival`), else the Unix epoch plus its
/// arrival: Azure has no relative times. Written as the 2023 trace writes
/// it, seven digits of fraction.
pub(super) fn encode(line: &TraceLine) -> Result<String, String> {
    let at = match &line.arrival {
        Some(wall) => parse_wall_clock(wall).map_err(|e| format!("arrival: {e}"))?,
        None => i64::try_from(line.arrival_us).map_err(|_| "arrival_us: too large")?,
    };
    // The reader takes four-digit years only (found by the `trace` fuzzer:
    // µs since the epoch past 9999 were written as a 6-digit year).
    if !(FIRST_US..=LAST_US).contains(&at) {
        return Err(format!(
            "arrival: {} is outside the years 0000 to 9999 that Azure's TIMESTAMP can hold",
            format_rfc3339(at)
        ));
    }
    // `2023-11-16T18:15:46.680590Z` → `2023-11-16 18:15:46.6805900`
    let stamp = format_rfc3339(at).replace('T', " ").replace('Z', "0");
    let context = line
        .input_tokens
        .ok_or("no input_tokens, which Azure's ContextTokens needs")?;
    let generated = line
        .output_tokens
        .ok_or("no output_tokens, which Azure's GeneratedTokens needs")?;
    Ok(format!("{stamp},{context},{generated}"))
}
