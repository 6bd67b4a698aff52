//! Anthropic messages SSE: named events, input tokens in `message_start`,
//! cumulative output tokens and the stop reason in `message_delta`.

use serde::Deserialize;

use super::scan::{self, PARTIAL_JSON, TEXT, THINKING, TYPE};
use super::{EventKind, Reading, Usage};

/// Reads one event: Content for a text/thinking/tool-input delta, Usage for
/// `message_delta`, Done for `message_stop`. The event name comes from
/// `event:`, or else from the data's first `type`.
pub(super) fn read(r: &mut Reading, name: &[u8], data: &[u8]) -> EventKind {
    if !scan::is_object(data) {
        r.malformed();
        return EventKind::Other;
    }
    let kind = if name.is_empty() {
        TYPE.first_str(data).unwrap_or_default()
    } else {
        name
    };
    match kind {
        b"content_block_delta" => {
            let text =
                TEXT.has_text(data) || THINKING.has_text(data) || PARTIAL_JSON.has_text(data);
            return if text {
                EventKind::Content
            } else {
                EventKind::Other
            };
        }
        b"message_start" => {
            if let Some(start) = r.parse::<MessageStart>(data) {
                if let Some(usage) = start.message.usage {
                    r.input_tokens = usage.tokens().input;
                }
                if let Some(model) = start.message.model {
                    r.response_model = Some(model);
                }
            }
        }
        b"message_delta" => {
            if let Some(delta) = r.parse::<MessageDelta>(data) {
                if let Some(reason) = delta.delta.and_then(|d| d.stop_reason) {
                    r.finish_reason = Some(reason);
                }
                if let Some(tokens) = delta.usage.map(|u| u.tokens()) {
                    // Cumulative: the last one is the total.
                    r.output_tokens = tokens.output.or(r.output_tokens);
                    r.input_tokens = tokens.input.or(r.input_tokens);
                }
            }
            return EventKind::Usage;
        }
        b"message_stop" => {
            r.clean_end = true;
            return EventKind::Done;
        }
        // `ping`, the content block's start and stop, `error`, and names
        // Anthropic may add: read, nothing counted.
        _ => {}
    }
    EventKind::Other
}

#[derive(Deserialize)]
struct MessageStart {
    message: Message,
}

/// `output_tokens` here is a placeholder (often 1), not a count: output
/// comes only from `message_delta`, so a stream cut before it is estimated.
#[derive(Deserialize)]
struct Message {
    model: Option<String>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct MessageDelta {
    delta: Option<StopDelta>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct StopDelta {
    stop_reason: Option<String>,
}
