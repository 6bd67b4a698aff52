//! The text of an LLM answer and a cheap similarity between two of them.

use std::collections::HashSet;

use serde_json::Value;

use crate::meter::{Framer, Framing, StreamEvent};

/// The generated text of an answer in any of the shapes sluice meters: an
/// SSE stream (OpenAI `delta.content` / `text`, Anthropic `delta.text`, TGI
/// `token.text`), Ollama's NDJSON (`message.content` / `response`), or one
/// JSON document (OpenAI `message.content` / `text`, Anthropic
/// `content[].text`, TGI `generated_text`). Events are cut by the meter's
/// [`Framer`]. `None` when the bytes are none of these, or name no text.
pub fn answer_text(body: &[u8]) -> Option<String> {
    let trimmed = body.trim_ascii_start();
    let mut out = String::new();
    if trimmed.starts_with(b"{") {
        if let Ok(value) = serde_json::from_slice::<Value>(trimmed) {
            document_text(&value, &mut out);
            return Some(out);
        }
        return events_text(Framing::Lines, body);
    }
    events_text(Framing::Sse, body)
}

/// The text of every event that is JSON; `None` when none is.
fn events_text(framing: Framing, body: &[u8]) -> Option<String> {
    let mut out = String::new();
    let mut any = false;
    let mut read = |event: StreamEvent<'_>| {
        let Some(data) = event.data.map(<[u8]>::trim_ascii) else {
            return;
        };
        if let Ok(event) = serde_json::from_slice::<Value>(data) {
            any = true;
            event_text(&event, &mut out);
        }
    };
    let mut framer = Framer::new(framing);
    framer.feed(body, &mut read);
    framer.finish(&mut read);
    any.then_some(out)
}

fn push_str(out: &mut String, value: Option<&Value>) {
    if let Some(s) = value.and_then(Value::as_str) {
        out.push_str(s);
    }
}

fn event_text(event: &Value, out: &mut String) {
    if let Some(choice) = event.pointer("/choices/0") {
        push_str(out, choice.pointer("/delta/content"));
        push_str(out, choice.get("text"));
    }
    push_str(out, event.pointer("/delta/text"));
    if event.pointer("/token/special") != Some(&Value::Bool(true)) {
        push_str(out, event.pointer("/token/text"));
    }
    push_str(out, event.pointer("/message/content"));
    push_str(out, event.get("response"));
}

fn document_text(doc: &Value, out: &mut String) {
    if let Some(choice) = doc.pointer("/choices/0") {
        push_str(out, choice.pointer("/message/content"));
        push_str(out, choice.get("text"));
    }
    if let Some(blocks) = doc.get("content").and_then(Value::as_array) {
        for block in blocks {
            push_str(out, block.get("text"));
        }
    }
    push_str(out, doc.get("generated_text"));
}

/// Token-set Jaccard: shared words over all words, case folded, split at
/// anything not alphanumeric. 1.0 for the same words (two empty answers
/// included), 0.0 for none in common.
pub fn similarity(a: &str, b: &str) -> f64 {
    let words = |s: &str| -> HashSet<String> {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let (a, b) = (words(a), words(b));
    let union = a.union(&b).count();
    if union == 0 {
        return 1.0;
    }
    a.intersection(&b).count() as f64 / union as f64
}
