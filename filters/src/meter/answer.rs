//! A non-streaming JSON answer (OpenAI, Anthropic or TGI `/generate`),
//! parsed once when complete.

use serde::Deserialize;

use super::{Reading, Usage};

/// Reads the whole body. An empty body is no answer, not a malformed one.
pub(super) fn read(r: &mut Reading, body: &[u8]) {
    if body.trim_ascii().is_empty() {
        return;
    }
    let Some(answer) = r.parse::<Answer>(body) else {
        return;
    };
    r.clean_end = true;
    r.response_model = answer.model;
    if let Some(tokens) = answer.usage.map(|u| u.tokens()) {
        r.input_tokens = tokens.input;
        r.output_tokens = tokens.output;
    }
    if let Some(details) = answer.details {
        r.output_tokens = details.generated_tokens.or(r.output_tokens);
        r.finish_reason = details.finish_reason;
    }
    let first_choice = answer.choices.into_iter().flatten().next();
    if let Some(reason) = first_choice.and_then(|c| c.finish_reason) {
        r.finish_reason = Some(reason);
    }
    if let Some(reason) = answer.stop_reason {
        r.finish_reason = Some(reason);
    }
}

#[derive(Deserialize)]
struct Answer {
    model: Option<String>,
    usage: Option<Usage>,
    /// OpenAI.
    choices: Option<Vec<Choice>>,
    /// Anthropic.
    stop_reason: Option<String>,
    /// TGI `/generate` with `details: true`.
    details: Option<Details>,
}

#[derive(Deserialize)]
struct Choice {
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Details {
    finish_reason: Option<String>,
    generated_tokens: Option<u64>,
}
