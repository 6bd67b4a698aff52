//! Each dialect read from a fixture written from its documented format, one
//! event per chunk; `split` feeds the same fixtures cut anywhere, `edge`
//! covers broken and unusual streams.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod edge;
mod kinds;
mod split;

use super::*;

pub(super) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(super) struct Fixture {
    pub name: &'static str,
    pub bytes: &'static [u8],
    pub dialect: Dialect,
}

macro_rules! fixture {
    ($file:literal, $dialect:expr) => {
        Fixture {
            name: $file,
            bytes: include_bytes!(concat!("../../tests/fixtures/streams/", $file)),
            dialect: $dialect,
        }
    };
}

pub(super) const FIXTURES: &[Fixture] = &[
    fixture!("openai_chat.sse", Dialect::OpenAi),
    fixture!("openai_completions.sse", Dialect::OpenAi),
    fixture!("vllm_bundled.sse", Dialect::OpenAi),
    fixture!("llamacpp_timings.sse", Dialect::OpenAi),
    fixture!("tgi_generate_stream.sse", Dialect::Tgi),
    fixture!("ollama_chat.ndjson", Dialect::Ollama),
    fixture!("ollama_generate.ndjson", Dialect::Ollama),
    fixture!("anthropic_messages.sse", Dialect::Anthropic),
];

fn fixture(name: &str) -> &'static Fixture {
    FIXTURES
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no fixture {name}"))
}

/// Where each event of `bytes` ends, terminator included, written apart
/// from the framer: SSE events end after `\n\n` or `\n\r\n`, NDJSON lines
/// after `\n`. The flag is false for a last event with no terminator.
pub(super) fn event_ends(bytes: &[u8], dialect: Dialect) -> Vec<(usize, bool)> {
    let mut ends = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let end = if bytes[i] != b'\n' {
            None
        } else if dialect == Dialect::Ollama {
            Some(i + 1)
        } else if bytes[i + 1..].starts_with(b"\n") {
            Some(i + 2)
        } else if bytes[i + 1..].starts_with(b"\r\n") {
            Some(i + 3)
        } else {
            None
        };
        match end {
            Some(end) => {
                ends.push((end, true));
                i = end;
            }
            None => i += 1,
        }
    }
    let last = ends.last().map_or(0, |(end, _)| *end);
    if !bytes[last..].trim_ascii().is_empty() {
        ends.push((bytes.len(), false));
    }
    ends
}

/// Feeds event `i` alone at `10 * (i + 1)` ms, finishes at 1 s. Returns
/// the summary and what each feed returned.
pub(super) fn by_event(bytes: &[u8], dialect: Dialect) -> (MeterSummary, Vec<u32>) {
    let mut meter = TokenMeter::new(dialect);
    let mut start = 0;
    let mut counts = Vec::new();
    for (i, (end, _)) in event_ends(bytes, dialect).into_iter().enumerate() {
        counts.push(meter.feed(&bytes[start..end], ms(10 * (i as u64 + 1))));
        start = end;
    }
    (meter.finish(ms(1000)), counts)
}

fn check(name: &str, counts: &[u32], expected: MeterSummary) {
    let f = fixture(name);
    let (summary, got) = by_event(f.bytes, f.dialect);
    assert_eq!(got, counts, "{name}: content events per chunk");
    assert_eq!(summary, expected, "{name}");
}

fn some(s: &str) -> Option<String> {
    Some(s.to_owned())
}

#[test]
fn openai_chat_role_chunk_is_not_content_and_usage_wins() {
    check(
        "openai_chat.sse",
        &[0, 1, 1, 1, 1, 0, 0, 0],
        MeterSummary {
            dialect: Dialect::OpenAi,
            first_content_at: Some(ms(20)),
            last_content_at: Some(ms(50)),
            content_events: 4,
            input_tokens: Some(12),
            output_tokens: Some(9),
            output_tokens_estimated: false,
            finish_reason: some("stop"),
            response_model: some("gpt-4o-mini-2024-07-18"),
            clean_end: true,
            malformed_events: 0,
        },
    );
}

#[test]
fn openai_completions_without_usage_are_estimated() {
    check(
        "openai_completions.sse",
        &[1, 1, 1, 0, 0],
        MeterSummary {
            dialect: Dialect::OpenAi,
            first_content_at: Some(ms(10)),
            last_content_at: Some(ms(30)),
            content_events: 3,
            input_tokens: None,
            output_tokens: Some(3),
            output_tokens_estimated: true,
            finish_reason: some("length"),
            response_model: some("meta-llama/Llama-3.1-8B-Instruct"),
            clean_end: true,
            malformed_events: 0,
        },
    );
}

#[test]
fn vllm_bundled_chunks_take_the_last_cumulative_usage() {
    check(
        "vllm_bundled.sse",
        &[0, 1, 1, 1, 0, 0],
        MeterSummary {
            dialect: Dialect::OpenAi,
            first_content_at: Some(ms(20)),
            last_content_at: Some(ms(40)),
            content_events: 3,
            input_tokens: Some(20),
            output_tokens: Some(7),
            output_tokens_estimated: false,
            finish_reason: some("stop"),
            response_model: some("Qwen/Qwen2.5-0.5B-Instruct"),
            clean_end: true,
            malformed_events: 0,
        },
    );
}

#[test]
fn llamacpp_timings_give_counts_without_usage() {
    check(
        "llamacpp_timings.sse",
        &[0, 1, 1, 1, 0, 0],
        MeterSummary {
            dialect: Dialect::OpenAi,
            first_content_at: Some(ms(20)),
            last_content_at: Some(ms(40)),
            content_events: 3,
            input_tokens: Some(11),
            output_tokens: Some(4),
            output_tokens_estimated: false,
            finish_reason: some("stop"),
            response_model: some("SmolLM2-135M-Instruct"),
            clean_end: true,
            malformed_events: 0,
        },
    );
}

#[test]
fn tgi_counts_tokens_and_reads_details() {
    check(
        "tgi_generate_stream.sse",
        &[1, 1, 1, 0],
        MeterSummary {
            dialect: Dialect::Tgi,
            first_content_at: Some(ms(10)),
            last_content_at: Some(ms(30)),
            content_events: 3,
            input_tokens: Some(7),
            output_tokens: Some(4),
            output_tokens_estimated: false,
            finish_reason: some("eos_token"),
            response_model: None,
            clean_end: true,
            malformed_events: 0,
        },
    );
}

#[test]
fn ollama_chat_reads_the_done_line() {
    check(
        "ollama_chat.ndjson",
        &[1, 1, 1, 0],
        MeterSummary {
            dialect: Dialect::Ollama,
            first_content_at: Some(ms(10)),
            last_content_at: Some(ms(30)),
            content_events: 3,
            input_tokens: Some(26),
            output_tokens: Some(5),
            output_tokens_estimated: false,
            finish_reason: some("stop"),
            response_model: some("llama3.2"),
            clean_end: true,
            malformed_events: 0,
        },
    );
}

#[test]
fn ollama_generate_reads_response() {
    check(
        "ollama_generate.ndjson",
        &[1, 1, 1, 0],
        MeterSummary {
            dialect: Dialect::Ollama,
            first_content_at: Some(ms(10)),
            last_content_at: Some(ms(30)),
            content_events: 3,
            input_tokens: Some(11),
            output_tokens: Some(3),
            output_tokens_estimated: false,
            finish_reason: some("length"),
            response_model: some("llama3.2"),
            clean_end: true,
            malformed_events: 0,
        },
    );
}

#[test]
fn anthropic_counts_deltas_and_reads_cumulative_usage() {
    check(
        "anthropic_messages.sse",
        &[0, 0, 0, 1, 1, 1, 0, 0, 0],
        MeterSummary {
            dialect: Dialect::Anthropic,
            first_content_at: Some(ms(40)),
            last_content_at: Some(ms(60)),
            content_events: 3,
            input_tokens: Some(25),
            output_tokens: Some(15),
            output_tokens_estimated: false,
            finish_reason: some("end_turn"),
            response_model: some("claude-sonnet-4-20250514"),
            clean_end: true,
            malformed_events: 0,
        },
    );
}
