//! Ollama `/api/chat` and `/api/generate`: one JSON object per line; the
//! last has `done: true` with the counts.

use serde::Deserialize;

use super::scan::{self, CONTENT, DONE, RESPONSE, THINKING, TOOL_CALLS};
use super::Reading;

/// Reads one line; returns whether it carried output.
pub(super) fn read(r: &mut Reading, data: &[u8]) -> bool {
    if !scan::is_object(data) {
        r.malformed();
        return false;
    }
    r.note_model(data);
    if DONE.is_true(data) {
        r.clean_end = true;
        if let Some(done) = r.parse::<Done>(data) {
            r.output_tokens = done.eval_count;
            r.input_tokens = done.prompt_eval_count;
            if done.done_reason.is_some() {
                r.finish_reason = done.done_reason;
            }
        }
    }
    CONTENT.has_text(data)
        || RESPONSE.has_text(data)
        || THINKING.has_text(data)
        || TOOL_CALLS.has_items(data)
}

#[derive(Deserialize)]
struct Done {
    eval_count: Option<u64>,
    prompt_eval_count: Option<u64>,
    done_reason: Option<String>,
}
