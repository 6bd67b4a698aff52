//! The OpenAI wire format the mock speaks: the request fields it reads and the JSON it answers with.

use serde::Deserialize;
use serde_json::{json, Value};

/// Which endpoint is answering: the two share pacing and differ only in object shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Endpoint {
    Chat,
    Text,
}

/// The request fields the mock honours; everything else in the body is accepted and ignored,
/// because real clients send many options (temperature, tools, ...) a mock has no use for.
#[derive(Debug, Default, Deserialize)]
pub(super) struct CompletionRequest {
    pub model: Option<String>,
    pub stream: Option<bool>,
    pub max_tokens: Option<u32>,
    pub max_completion_tokens: Option<u32>,
    pub stream_options: Option<StreamOptions>,
    pub messages: Option<Vec<Message>>,
    pub prompt: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct StreamOptions {
    pub include_usage: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Message {
    pub content: Option<Value>,
}

impl CompletionRequest {
    /// The smaller of the two token caps: clients send either name, some send both.
    pub(super) fn token_cap(&self) -> Option<u32> {
        match (self.max_tokens, self.max_completion_tokens) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub(super) fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }

    /// A rough prompt size (whitespace-separated words), enough to make `usage` plausible.
    pub(super) fn prompt_tokens(&self) -> u32 {
        let chat: usize = self
            .messages
            .iter()
            .flatten()
            .filter_map(|m| m.content.as_ref())
            .map(count_words)
            .sum();
        let text = self.prompt.as_ref().map_or(0, count_words);
        u32::try_from(chat + text).unwrap_or(u32::MAX)
    }
}

/// Counts words in the shapes a content or prompt may take: a string, text parts
/// (`[{"type":"text","text":..}]`), a list of strings, or pre-tokenised ids (one token each).
fn count_words(v: &Value) -> usize {
    match v {
        Value::String(s) => s.split_whitespace().count(),
        Value::Array(items) => items.iter().map(count_words).sum(),
        Value::Object(part) => part.get("text").map_or(0, count_words),
        Value::Number(_) => 1,
        Value::Null | Value::Bool(_) => 0,
    }
}

/// What every chunk and answer of one request carries.
#[derive(Clone, Debug)]
pub(super) struct AnswerMeta {
    pub endpoint: Endpoint,
    pub id: String,
    pub created: u64,
    pub model: String,
}

impl AnswerMeta {
    fn object(&self, streaming: bool) -> &'static str {
        match (self.endpoint, streaming) {
            (Endpoint::Chat, true) => "chat.completion.chunk",
            (Endpoint::Chat, false) => "chat.completion",
            (Endpoint::Text, _) => "text_completion",
        }
    }

    fn envelope(&self, streaming: bool, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": self.object(streaming),
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_mock",
            "choices": choices,
        })
    }

    /// The role-only first chunk OpenAI sends with the headers, before any content.
    pub(super) fn role_chunk(&self, include_usage: bool) -> Value {
        let choice = json!({
            "index": 0,
            "delta": {"role": "assistant"},
            "logprobs": null,
            "finish_reason": null,
        });
        self.chunk(choice, include_usage)
    }

    /// One content chunk; `finish` is set on the last one. Empty text gives an empty delta,
    /// which is how a zero-token answer still reports why it ended.
    pub(super) fn content_chunk(
        &self,
        text: &str,
        finish: Option<&str>,
        include_usage: bool,
    ) -> Value {
        let choice = match self.endpoint {
            Endpoint::Chat => {
                let delta = if text.is_empty() {
                    json!({})
                } else {
                    json!({"content": text})
                };
                json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish})
            }
            Endpoint::Text => {
                json!({"index": 0, "text": text, "logprobs": null, "finish_reason": finish})
            }
        };
        self.chunk(choice, include_usage)
    }

    /// With `include_usage`, OpenAI puts `"usage": null` on every chunk but the last.
    fn chunk(&self, choice: Value, include_usage: bool) -> Value {
        let mut v = self.envelope(true, json!([choice]));
        if include_usage {
            v["usage"] = Value::Null;
        }
        v
    }

    /// The final streaming chunk: no choices, only usage.
    pub(super) fn usage_chunk(&self, prompt_tokens: u32, completion_tokens: u32) -> Value {
        let mut v = self.envelope(true, json!([]));
        v["usage"] = usage(prompt_tokens, completion_tokens);
        v
    }

    /// The whole non-streaming answer.
    pub(super) fn full_answer(
        &self,
        text: &str,
        finish: &str,
        prompt_tokens: u32,
        completion_tokens: u32,
    ) -> Value {
        let choice = match self.endpoint {
            Endpoint::Chat => json!({
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": null},
                "logprobs": null,
                "finish_reason": finish,
            }),
            Endpoint::Text => json!({
                "index": 0,
                "text": text,
                "logprobs": null,
                "finish_reason": finish,
            }),
        };
        let mut v = self.envelope(false, json!([choice]));
        v["usage"] = usage(prompt_tokens, completion_tokens);
        v
    }
}

fn usage(prompt_tokens: u32, completion_tokens: u32) -> Value {
    json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": u64::from(prompt_tokens) + u64::from(completion_tokens),
    })
}

/// The model list `GET /v1/models` answers.
pub(super) fn model_list(model: &str, created: u64) -> Value {
    json!({
        "object": "list",
        "data": [{"id": model, "object": "model", "created": created, "owned_by": "sluice"}],
    })
}

/// OpenAI's error envelope, used for every non-2xx answer.
pub(super) fn error_body(message: &str, kind: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
}
