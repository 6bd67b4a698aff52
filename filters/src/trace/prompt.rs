//! A prompt's identity in a trace without its text: how many messages it
//! had, how long it was, and keyed hashes of its blocks that show which
//! requests share a prefix (what a KV cache reuses) after redaction.

use serde_json::Value;

use crate::redact::Secret;

/// Bytes of prompt text per hash block: about 512 tokens at 4 bytes a
/// token, Mooncake's block.
pub const HASH_BLOCK_BYTES: usize = 2048;

/// Ids are kept under 2^53 so that every JSON reader (JavaScript's too)
/// reads them exactly.
const ID_MASK: u64 = (1 << 53) - 1;

/// What the trace keeps of a request body's prompt.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PromptShape {
    /// The prompt as the model reads it, parts joined by `\n`: the `system`
    /// text and every message's content (strings and the `text` of parts),
    /// else `prompt` / `input` / `inputs`. `None` when the body is not JSON.
    pub text: Option<String>,
    /// Characters (Unicode scalar values) of `text`.
    pub chars: usize,
    /// The length of `messages`, for chat.
    pub messages: Option<u32>,
}

impl PromptShape {
    pub fn of(body: &[u8]) -> PromptShape {
        let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(body) else {
            return PromptShape::default();
        };
        let mut parts: Vec<&str> = Vec::new();
        if let Some(system) = fields.get("system") {
            texts(system, 0, &mut parts);
        }
        let messages = fields.get("messages").and_then(Value::as_array);
        match messages {
            Some(list) => list
                .iter()
                .filter_map(|m| m.get("content"))
                .for_each(|c| texts(c, 0, &mut parts)),
            None => ["prompt", "input", "inputs"]
                .iter()
                .filter_map(|k| fields.get(*k))
                .for_each(|v| texts(v, 0, &mut parts)),
        }
        let text = parts.join("\n");
        PromptShape {
            chars: text.chars().count(),
            text: Some(text),
            messages: messages.map(|m| u32::try_from(m.len()).unwrap_or(u32::MAX)),
        }
    }
}

/// The text in a content value: a string, a part's `text`, a nested
/// `content`, or lists of those. Token ids and images carry none. Depth is
/// bounded as content nests at most list → part → content → list → part.
fn texts<'v>(value: &'v Value, depth: u8, out: &mut Vec<&'v str>) {
    if depth > 4 {
        return;
    }
    match value {
        Value::String(text) => out.push(text),
        Value::Array(items) => items.iter().for_each(|v| texts(v, depth + 1, out)),
        Value::Object(fields) => match (fields.get("text"), fields.get("content")) {
            (Some(Value::String(text)), _) => out.push(text),
            (_, Some(content)) => texts(content, depth + 1, out),
            _ => {}
        },
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// A rolling keyed hash per block of [`HASH_BLOCK_BYTES`] of `text`, the
/// last block partial: id i covers the whole prefix up to block i, so two
/// prompts share their first k ids when they share their first k blocks.
/// Keyed by the recorder's secret, so a short prompt cannot be found by
/// hashing guesses.
pub fn hash_ids(text: &str, secret: &Secret) -> Vec<u64> {
    let mut previous = [0u8; 8];
    text.as_bytes()
        .chunks(HASH_BLOCK_BYTES)
        .map(|block| {
            let digest = secret.mac(&[b"block", &previous, block]);
            previous.copy_from_slice(&digest[..8]);
            u64::from_le_bytes(previous) & ID_MASK
        })
        .collect()
}
