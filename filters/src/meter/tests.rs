//! Each dialect read from a fixture written from its documented format, one
//! event per chunk; `split` feeds the same fixtures cut anywhere, `edge`
//! covers broken and unusual streams.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod edge;
mod grpc;
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

fn some(s: &str) -> Option<String> {
    Some(s.to_owned())
}

/// What one fixture, fed one event per chunk, must give. The first and last
/// content moments and the content count follow from `counts`, event `i`
/// arriving at `10 * (i + 1)` ms; every fixture ends clean and well formed.
struct Case {
    fixture: &'static str,
    /// What the fixture shows about its dialect.
    shows: &'static str,
    /// Content events completed by each event's chunk.
    counts: &'static [u32],
    input_tokens: Option<u64>,
    output_tokens: u64,
    estimated: bool,
    finish_reason: &'static str,
    response_model: Option<&'static str>,
}

const CASES: &[Case] = &[
    Case {
        fixture: "openai_chat.sse",
        shows: "the role chunk is not content, and usage wins over the count",
        counts: &[0, 1, 1, 1, 1, 0, 0, 0],
        input_tokens: Some(12),
        output_tokens: 9,
        estimated: false,
        finish_reason: "stop",
        response_model: Some("gpt-4o-mini-2024-07-18"),
    },
    Case {
        fixture: "openai_completions.sse",
        shows: "completions without usage are estimated from the chunks",
        counts: &[1, 1, 1, 0, 0],
        input_tokens: None,
        output_tokens: 3,
        estimated: true,
        finish_reason: "length",
        response_model: Some("meta-llama/Llama-3.1-8B-Instruct"),
    },
    Case {
        fixture: "vllm_bundled.sse",
        shows: "bundled chunks take the last cumulative usage",
        counts: &[0, 1, 1, 1, 0, 0],
        input_tokens: Some(20),
        output_tokens: 7,
        estimated: false,
        finish_reason: "stop",
        response_model: Some("Qwen/Qwen2.5-0.5B-Instruct"),
    },
    Case {
        fixture: "llamacpp_timings.sse",
        shows: "llama.cpp's timings give the counts without usage",
        counts: &[0, 1, 1, 1, 0, 0],
        input_tokens: Some(11),
        output_tokens: 4,
        estimated: false,
        finish_reason: "stop",
        response_model: Some("SmolLM2-135M-Instruct"),
    },
    Case {
        fixture: "tgi_generate_stream.sse",
        shows: "TGI counts tokens and reads its details",
        counts: &[1, 1, 1, 0],
        input_tokens: Some(7),
        output_tokens: 4,
        estimated: false,
        finish_reason: "eos_token",
        response_model: None,
    },
    Case {
        fixture: "ollama_chat.ndjson",
        shows: "Ollama's chat reads the done line",
        counts: &[1, 1, 1, 0],
        input_tokens: Some(26),
        output_tokens: 5,
        estimated: false,
        finish_reason: "stop",
        response_model: Some("llama3.2"),
    },
    Case {
        fixture: "ollama_generate.ndjson",
        shows: "Ollama's generate reads `response`",
        counts: &[1, 1, 1, 0],
        input_tokens: Some(11),
        output_tokens: 3,
        estimated: false,
        finish_reason: "length",
        response_model: Some("llama3.2"),
    },
    Case {
        fixture: "anthropic_messages.sse",
        shows: "Anthropic counts deltas and reads the cumulative usage",
        counts: &[0, 0, 0, 1, 1, 1, 0, 0, 0],
        input_tokens: Some(25),
        output_tokens: 15,
        estimated: false,
        finish_reason: "end_turn",
        response_model: Some("claude-sonnet-4-20250514"),
    },
];

#[test]
fn every_fixture_read_event_by_event() {
    assert_eq!(CASES.len(), FIXTURES.len(), "one case per fixture");
    for case in CASES {
        let f = fixture(case.fixture);
        let (summary, got) = by_event(f.bytes, f.dialect);
        let name = format!("{}: {}", case.fixture, case.shows);
        assert_eq!(got, case.counts, "{name}: content events per chunk");
        let content_at = |i: usize| ms(10 * (i as u64 + 1));
        let expected = MeterSummary {
            dialect: f.dialect,
            first_content_at: case.counts.iter().position(|c| *c > 0).map(content_at),
            last_content_at: case.counts.iter().rposition(|c| *c > 0).map(content_at),
            content_events: case.counts.iter().sum(),
            input_tokens: case.input_tokens,
            output_tokens: Some(case.output_tokens),
            output_tokens_estimated: case.estimated,
            finish_reason: some(case.finish_reason),
            response_model: case.response_model.map(str::to_owned),
            clean_end: true,
            malformed_events: 0,
        };
        assert_eq!(summary, expected, "{name}");
    }
}
