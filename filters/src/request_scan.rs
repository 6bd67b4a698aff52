//! What the proxy needs to know about an LLM request from its JSON body:
//! model, streaming, temperature, and a fingerprint of the prompt that
//! lets answers to the same prompt be compared without keeping the prompt.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The fields of a request body the proxy uses. Never holds prompt text.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestInfo {
    pub model: Option<String>,
    /// `"stream": true` was sent. Absent means false (OpenAI's default; the
    /// response's content-type is what the meter goes by anyway).
    pub stream: bool,
    pub temperature: Option<f64>,
    /// Hex SHA-256 of `prompt + "\n" + model + "\n" + temperature`, the
    /// temperature as written in the body (`0.70` stays `0.70`), absent
    /// parts empty. `None` when the body could not be parsed.
    pub prompt_fingerprint: Option<String>,
    /// Characters (Unicode scalar values) in the prompt.
    pub input_chars: usize,
    /// `max_tokens` (or `max_completion_tokens`), what a rate limit reserves.
    pub max_tokens: Option<u64>,
}

/// Reads a request body (its first chunk or chunks, up to 64 KiB). The
/// prompt is the text of `system` and of every message's `content` (string
/// contents and the `text` of content parts), else `prompt` / `input` /
/// `inputs`, parts joined by `\n`. A truncated or invalid body still yields
/// the model (and `stream`) by a byte search, but no fingerprint.
pub fn scan_request(body: &[u8]) -> RequestInfo {
    match serde_json::from_slice::<Request<'_>>(body) {
        Ok(request) => from_parsed(&request),
        Err(_) => from_bytes(body),
    }
}

#[derive(Deserialize)]
struct Request<'a> {
    #[serde(borrow)]
    model: Option<Cow<'a, str>>,
    stream: Option<bool>,
    #[serde(borrow)]
    temperature: Option<&'a RawValue>,
    system: Option<Value>,
    messages: Option<Vec<Message>>,
    prompt: Option<Value>,
    input: Option<Value>,
    inputs: Option<Value>,
    max_tokens: Option<u64>,
    max_completion_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct Message {
    content: Option<Value>,
}

fn from_parsed(request: &Request<'_>) -> RequestInfo {
    let mut prompt = Prompt::default();
    if let Some(system) = &request.system {
        prompt.add(system, 0);
    }
    for message in request.messages.iter().flatten() {
        if let Some(content) = &message.content {
            prompt.add(content, 0);
        }
    }
    if request.messages.is_none() {
        for value in [&request.prompt, &request.input, &request.inputs]
            .into_iter()
            .flatten()
        {
            prompt.add(value, 0);
        }
    }
    let model = request.model.as_deref().unwrap_or("");
    let temperature = request.temperature.map_or("", |raw| raw.get());
    prompt.hash.update(b"\n");
    prompt.hash.update(model.as_bytes());
    prompt.hash.update(b"\n");
    prompt.hash.update(temperature.as_bytes());
    RequestInfo {
        model: request.model.as_ref().map(|m| m.to_string()),
        stream: request.stream.unwrap_or(false),
        temperature: serde_json::from_str(temperature).ok(),
        prompt_fingerprint: Some(hex(&prompt.hash.finalize())),
        input_chars: prompt.chars,
        max_tokens: request.max_completion_tokens.or(request.max_tokens),
    }
}

/// The prompt, hashed as it is walked: it is never assembled or kept.
#[derive(Default)]
struct Prompt {
    hash: Sha256,
    chars: usize,
    parts: usize,
}

impl Prompt {
    /// Adds the text of a content value: a string, a part with `text`, a
    /// message-like object with `content`, or a list of those. Token-id
    /// arrays and images carry no text. Depth is bounded: content nests
    /// at most list → part → content → list → part.
    fn add(&mut self, value: &Value, depth: u8) {
        if depth > 4 {
            return;
        }
        match value {
            Value::String(text) => self.text(text),
            Value::Array(items) => items.iter().for_each(|v| self.add(v, depth + 1)),
            Value::Object(fields) => {
                if let Some(Value::String(text)) = fields.get("text") {
                    self.text(text);
                } else if let Some(content) = fields.get("content") {
                    self.add(content, depth + 1);
                }
            }
            _ => {}
        }
    }

    fn text(&mut self, text: &str) {
        if self.parts > 0 {
            self.hash.update(b"\n");
        }
        self.parts += 1;
        self.hash.update(text.as_bytes());
        self.chars += text.chars().count();
    }
}

/// Best effort for a body that does not parse (cut at 64 KiB): the first
/// `"model"` and `"stream"` keys, found by byte search.
fn from_bytes(body: &[u8]) -> RequestInfo {
    let model = scan_str(body, b"\"model\"").and_then(|raw| std::str::from_utf8(raw).ok());
    RequestInfo {
        model: model.filter(|m| !m.contains('\\')).map(str::to_owned),
        stream: after_key(body, b"\"stream\"").is_some_and(|v| v.starts_with(b"true")),
        ..RequestInfo::default()
    }
}

/// The bytes after the first `key` followed by `:`, whitespace skipped.
fn after_key<'b>(body: &'b [u8], key: &[u8]) -> Option<&'b [u8]> {
    memchr::memmem::find_iter(body, key).find_map(|at| {
        let rest = body[at + key.len()..].trim_ascii_start();
        rest.strip_prefix(b":").map(<[u8]>::trim_ascii_start)
    })
}

/// The raw contents of the string value of the first `key`.
fn scan_str<'b>(body: &'b [u8], key: &[u8]) -> Option<&'b [u8]> {
    let value = after_key(body, key)?.strip_prefix(b"\"")?;
    let end = memchr::memchr(b'"', value)?;
    Some(&value[..end])
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    bytes
        .iter()
        .flat_map(|b| [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]])
        .map(char::from)
        .collect()
}

/// The body with its JSON `model` field set to `model` (added when absent),
/// every other byte as sent; `None` when the body is not a JSON object. Used
/// by a split target's `rewrite.model` and by shadow copies.
pub fn with_model(body: &[u8], model: &str) -> Option<Vec<u8>> {
    let object = serde_json::from_slice::<&RawValue>(body).ok()?;
    if !object.get().starts_with('{') {
        return None;
    }
    // A map, not a struct with an `Option`: `"model": null` is a field to replace.
    let top: std::collections::BTreeMap<Cow<'_, str>, &RawValue> =
        serde_json::from_str(object.get()).ok()?;
    let quoted = serde_json::to_string(model).ok()?;
    let mut out = Vec::with_capacity(body.len() + quoted.len());
    match top.get("model") {
        Some(raw) => {
            // A borrowed `RawValue` is a slice of `body`: its offset is where it starts.
            let start = raw.get().as_ptr() as usize - body.as_ptr() as usize;
            out.extend_from_slice(&body[..start]);
            out.extend_from_slice(quoted.as_bytes());
            out.extend_from_slice(&body[start + raw.get().len()..]);
        }
        None => {
            let open = body.iter().position(|b| *b == b'{')?;
            let empty = top_is_empty(&body[open + 1..]);
            out.extend_from_slice(&body[..=open]);
            out.extend_from_slice(b"\"model\":");
            out.extend_from_slice(quoted.as_bytes());
            if !empty {
                out.push(b',');
            }
            out.extend_from_slice(&body[open + 1..]);
        }
    }
    Some(out)
}

/// Whether what follows an object's `{` is only its closing `}`.
fn top_is_empty(rest: &[u8]) -> bool {
    rest.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'}')
}

#[cfg(test)]
mod tests;
