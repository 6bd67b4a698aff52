//! TGI `/generate_stream` SSE: one token per event; the last event carries
//! `generated_text` and `details` with the counts.

use serde::Deserialize;

use super::scan::{self, DETAILS, GENERATED_TEXT, SPECIAL, TOKEN};
use super::{EventKind, Reading};

/// Reads one event's data. Content: a token that is not special
/// (end-of-sequence), even when its text is empty (a token ending in the
/// middle of a UTF-8 character); else Done for the last event (`details` or
/// `generated_text`).
pub(super) fn read(r: &mut Reading, data: &[u8]) -> EventKind {
    if !scan::is_object(data) {
        r.malformed();
        return EventKind::Other;
    }
    let details = DETAILS.first_object(data);
    let ends = details.is_some() || GENERATED_TEXT.first_str(data).is_some();
    r.clean_end |= ends;
    if let Some(details) = details {
        if let Some(d) = r.parse::<Details>(details) {
            r.output_tokens = d.generated_tokens.or(r.output_tokens);
            r.input_tokens = d.input_length.or(r.input_tokens);
            if d.finish_reason.is_some() {
                r.finish_reason = d.finish_reason;
            }
        }
    }
    if TOKEN
        .first_object(data)
        .is_some_and(|token| !SPECIAL.is_true(token))
    {
        EventKind::Content
    } else if ends {
        EventKind::Done
    } else {
        EventKind::Other
    }
}

/// `input_length` is sent by recent TGI versions only.
#[derive(Deserialize)]
struct Details {
    finish_reason: Option<String>,
    generated_tokens: Option<u64>,
    input_length: Option<u64>,
}
