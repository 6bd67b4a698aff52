//! OpenAI chat/completions SSE, as also spoken by vLLM, llama.cpp server and
//! the `/v1` endpoints of TGI and Ollama.

use serde::Deserialize;

use super::scan::{self, CHOICES, CONTENT, FINISH_REASON, REASONING, REASONING_CONTENT, REFUSAL};
use super::scan::{TEXT, TIMINGS, TOOL_CALLS, USAGE};
use super::{EventKind, Reading, Tokens, Usage};

/// Reads one event's data. Content: non-empty text of any kind (answer,
/// completion, reasoning, refusal) or tool calls; Usage: a `usage` object
/// with no choice (the last chunk, `choices: []`). vLLM's per-chunk usage
/// rides on chunks with choices, which stay what their choices make them.
pub(super) fn read(r: &mut Reading, data: &[u8]) -> EventKind {
    if data == b"[DONE]" {
        r.clean_end = true;
        return EventKind::Done;
    }
    if !scan::is_object(data) {
        r.malformed();
        return EventKind::Other;
    }
    r.note_model(data);
    for raw in FINISH_REASON.strs(data) {
        scan::set_decoded(&mut r.finish_reason, raw);
    }
    let usage = USAGE.first_object(data);
    if let Some(usage) = usage {
        r.openai_usage.clear();
        r.openai_usage.extend_from_slice(usage);
    }
    if let Some(timings) = TIMINGS.first_object(data) {
        if let Some(t) = r.parse::<Timings>(timings) {
            r.timings = Some(Tokens {
                input: t.prompt_n.map(|n| n + t.cache_n.unwrap_or(0)),
                output: t.predicted_n,
            });
        }
    }
    let content = CONTENT.has_text(data)
        || TEXT.has_text(data)
        || REASONING_CONTENT.has_text(data)
        || REASONING.has_text(data)
        || REFUSAL.has_text(data)
        || TOOL_CALLS.has_items(data);
    if content {
        EventKind::Content
    } else if usage.is_some() && !CHOICES.has_items(data) {
        EventKind::Usage
    } else {
        EventKind::Other
    }
}

/// At the end: the last usage object wins, else llama.cpp's timings.
pub(super) fn finish(r: &mut Reading) {
    let mut tokens = r.timings.unwrap_or_default();
    if !r.openai_usage.is_empty() {
        let raw = std::mem::take(&mut r.openai_usage);
        if let Some(usage) = r.parse::<Usage>(&raw) {
            tokens = usage.tokens();
        }
    }
    r.input_tokens = tokens.input;
    r.output_tokens = tokens.output;
}

/// llama.cpp's per-request timings. `prompt_n` counts only the prompt
/// tokens evaluated; `cache_n` the ones reused from the cache.
#[derive(Deserialize)]
struct Timings {
    prompt_n: Option<u64>,
    cache_n: Option<u64>,
    predicted_n: Option<u64>,
}
