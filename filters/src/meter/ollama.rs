//! Ollama `/api/chat` and `/api/generate`: one JSON object per line; the
//! last has `done: true` with the counts.

use serde::Deserialize;

use super::scan::{self, CONTENT, DONE, RESPONSE, THINKING, TOOL_CALLS};
use super::{EventKind, Reading};

/// Reads one line: Content when it carries output, else Done for the last
/// line (`done: true`, with the counts).
pub(super) fn read(r: &mut Reading, data: &[u8]) -> EventKind {
    if !scan::is_object(data) {
        r.malformed();
        return EventKind::Other;
    }
    r.note_model(data);
    let done = DONE.is_true(data);
    if done {
        r.clean_end = true;
        if let Some(done) = r.parse::<Done>(data) {
            r.output_tokens = done.eval_count;
            r.input_tokens = done.prompt_eval_count;
            if done.done_reason.is_some() {
                r.finish_reason = done.done_reason;
            }
        }
    }
    let content = CONTENT.has_text(data)
        || RESPONSE.has_text(data)
        || THINKING.has_text(data)
        || TOOL_CALLS.has_items(data);
    if content {
        EventKind::Content
    } else if done {
        EventKind::Done
    } else {
        EventKind::Other
    }
}

#[derive(Deserialize)]
struct Done {
    eval_count: Option<u64>,
    prompt_eval_count: Option<u64>,
    done_reason: Option<String>,
}
