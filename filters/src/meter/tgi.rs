//! TGI `/generate_stream` SSE: one token per event; the last event carries
//! `generated_text` and `details` with the counts.

use serde::Deserialize;

use super::scan::{self, DETAILS, GENERATED_TEXT, SPECIAL, TOKEN};
use super::Reading;

/// Reads one event's data; returns whether it carried output: a token that
/// is not special (end-of-sequence), even when its text is empty (a token
/// ending in the middle of a UTF-8 character).
pub(super) fn read(r: &mut Reading, data: &[u8]) -> bool {
    if !scan::is_object(data) {
        r.malformed();
        return false;
    }
    if let Some(details) = DETAILS.first_object(data) {
        r.clean_end = true;
        if let Some(d) = r.parse::<Details>(details) {
            r.output_tokens = d.generated_tokens.or(r.output_tokens);
            r.input_tokens = d.input_length.or(r.input_tokens);
            if d.finish_reason.is_some() {
                r.finish_reason = d.finish_reason;
            }
        }
    } else if GENERATED_TEXT.first_str(data).is_some() {
        r.clean_end = true;
    }
    TOKEN
        .first_object(data)
        .is_some_and(|token| !SPECIAL.is_true(token))
}

/// `input_length` is sent by recent TGI versions only.
#[derive(Deserialize)]
struct Details {
    finish_reason: Option<String>,
    generated_tokens: Option<u64>,
    input_length: Option<u64>,
}
