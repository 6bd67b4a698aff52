//! The streaming token meter: reads an LLM response body chunk by chunk, as
//! it passes, and reports its token timing and counts. Pure: the caller
//! passes each chunk with the time since the request started.
//!
//! Definitions follow vLLM's benchmark (see DESIGN.md, "Metrics"):
//! - A *content event* is an event that carries generated output: non-empty
//!   text (`delta.content`, `text`, `reasoning_content`, `reasoning`,
//!   `refusal`),
//!   non-empty `tool_calls`, an Anthropic text/thinking/tool-input delta, a
//!   non-special TGI token, a non-empty Ollama `content`/`response`/`thinking`.
//!   OpenAI's role-only first chunk has a non-empty `choices` but no output,
//!   so it is not one: TTFT is the time of the first content event, which is
//!   when vLLM's benchmark sees its first generated text.
//! - One event may carry several tokens (vLLM bundles them): counts come
//!   from the server's usage when it sends one; otherwise the number of
//!   content events is reported as the output token count, marked estimated.
//!
//! - A gRPC answer (`application/grpc`) is read as length-prefixed messages,
//!   not events: each message is a content event, at the `at` of the chunk
//!   that brought its last byte (as an SSE event's time is the chunk that
//!   completed it). Nothing in a message is read; its output count is the
//!   number of messages, marked estimated.
//!
//! Fields are found with `memchr`; serde_json parses only the few objects
//! that carry counts (usage, details, Ollama's last line, Anthropic's
//! `message_start`/`message_delta`), once or a few times per stream.

mod answer;
mod anthropic;
mod frame;
mod ollama;
mod openai;
mod scan;
mod tgi;

use std::time::Duration;

use serde::Deserialize;

use crate::grpc::{is_grpc, GrpcFramer};

pub(crate) use frame::OwnedEvent;
pub use frame::{Framer, Framing, StreamEvent, MAX_EVENT};

/// The wire format of a response, which decides how the meter reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI chat/completions SSE; also vLLM, llama.cpp server, TGI's and
    /// Ollama's `/v1` endpoints.
    OpenAi,
    /// Anthropic messages SSE, with named events.
    Anthropic,
    /// TGI `/generate_stream` SSE: one token per event.
    Tgi,
    /// Ollama `/api/chat` and `/api/generate`: newline-delimited JSON.
    Ollama,
    /// A non-streaming JSON answer, read once complete.
    Json,
    /// gRPC (`application/grpc...`): length-prefixed messages, counted as
    /// they end (a unary answer is one message).
    Grpc,
    /// Anything else: passed through unread.
    #[default]
    Unknown,
}

impl Dialect {
    /// From the request path and the response content-type:
    /// `text/event-stream` → by path (`/v1/messages` Anthropic,
    /// `/generate_stream` TGI, else OpenAi); `application/x-ndjson` or a path
    /// `/api/chat` | `/api/generate` → Ollama; `application/json` → Json;
    /// `application/grpc...` → Grpc; else Unknown. Paths match by suffix, so
    /// a route prefix is allowed.
    pub fn detect(request_path: &str, content_type: Option<&[u8]>) -> Dialect {
        if is_grpc(content_type) {
            return Dialect::Grpc;
        }
        let path = request_path
            .split_once(['?', '#'])
            .map_or(request_path, |(p, _)| p);
        let media = content_type.map_or(&b""[..], |ct| {
            ct.split(|b| *b == b';').next().unwrap_or(ct).trim_ascii()
        });
        let is = |m: &str| media.eq_ignore_ascii_case(m.as_bytes());
        if is("text/event-stream") {
            if path.ends_with("/v1/messages") {
                Dialect::Anthropic
            } else if path.ends_with("/generate_stream") {
                Dialect::Tgi
            } else {
                Dialect::OpenAi
            }
        } else if is("application/x-ndjson")
            || path.ends_with("/api/chat")
            || path.ends_with("/api/generate")
        {
            Dialect::Ollama
        } else if is("application/json") {
            Dialect::Json
        } else {
            Dialect::Unknown
        }
    }

    /// How this dialect's bodies are cut into events (gRPC's messages are
    /// cut by a [`GrpcFramer`], not into events).
    pub fn framing(self) -> Framing {
        match self {
            Dialect::OpenAi | Dialect::Anthropic | Dialect::Tgi => Framing::Sse,
            Dialect::Ollama => Framing::Lines,
            Dialect::Json => Framing::Whole,
            Dialect::Grpc | Dialect::Unknown => Framing::Off,
        }
    }
}

/// What one event of a stream carries, as its dialect's reader saw it. Stream
/// faults pace, drop and cut by it. When an event is several (TGI's last
/// event may carry a token and end the stream), the first of this list wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// Carries generated output (a *content event*, see the module docs).
    Content,
    /// The dialect's end marker: OpenAI's `data: [DONE]`, Anthropic's
    /// `message_stop`, TGI's event with `details` or `generated_text`,
    /// Ollama's `done: true` (which also carries the counts).
    Done,
    /// A usage report without content: OpenAI's last chunk (`choices: []`),
    /// Anthropic's `message_delta`.
    Usage,
    /// Anything else: a role-only chunk, `message_start`, a ping, a comment.
    Other,
}

/// What a response said about its tokens, read at its end.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MeterSummary {
    pub dialect: Dialect,
    /// TTFT: the `at` of the chunk that completed the first content event.
    /// `None` for a non-streaming answer or a stream without content.
    pub first_content_at: Option<Duration>,
    /// The `at` of the chunk that completed the last content event.
    pub last_content_at: Option<Duration>,
    /// Events that carried output (see the module docs).
    pub content_events: u32,
    /// Prompt tokens from the server's usage, when it sent one.
    pub input_tokens: Option<u64>,
    /// Output tokens: the server's count when it sent one (the last usage
    /// wins: vLLM's per-chunk usage and Anthropic's are cumulative), else
    /// `content_events` for a stream and `None` for a JSON answer.
    pub output_tokens: Option<u64>,
    /// `output_tokens` is the count of content events, not the server's.
    pub output_tokens_estimated: bool,
    /// The last non-null finish reason as the server wrote it (`stop`,
    /// `length`, `end_turn`, `eos_token`, ...).
    pub finish_reason: Option<String>,
    /// The model the server says answered.
    pub response_model: Option<String>,
    /// The stream ended the way its dialect ends: `[DONE]` (OpenAI),
    /// `message_stop` (Anthropic), `done: true` (Ollama), an event with
    /// `details` or `generated_text` (TGI), a complete document (Json).
    pub clean_end: bool,
    /// Events that could not be read: not JSON-shaped, an unreadable count
    /// object, or longer than the size limit. Counted, never fatal.
    pub malformed_events: u32,
}

/// Reads one response body; one per request.
pub struct TokenMeter {
    dialect: Dialect,
    framer: Framer,
    /// Used for `Dialect::Grpc` only: 12 bytes, no heap.
    messages: GrpcFramer,
    reading: Reading,
    /// Set by `finish`; later calls return it and later chunks are ignored.
    summary: Option<MeterSummary>,
}

impl TokenMeter {
    pub fn new(dialect: Dialect) -> Self {
        Self {
            dialect,
            framer: Framer::new(dialect.framing()),
            messages: GrpcFramer::new(),
            reading: Reading::default(),
            summary: None,
        }
    }

    /// One body chunk as it arrived, `at` = time since the request started.
    /// Returns how many content events completed in this chunk, so the
    /// caller can record the gaps between them.
    pub fn feed(&mut self, chunk: &[u8], at: Duration) -> u32 {
        if self.summary.is_some() {
            return 0;
        }
        if self.dialect == Dialect::Grpc {
            let ended = self.messages.feed(chunk);
            for _ in 0..ended {
                self.reading.content(at);
            }
            return ended;
        }
        let before = self.reading.content_events;
        // The closure borrows `reading` and `dialect` while `framer` is
        // borrowed for the call: disjoint fields.
        self.framer.feed(chunk, |event| {
            self.reading.read(self.dialect, event, at);
        });
        self.reading.content_events.saturating_sub(before)
    }

    /// One event already cut by the caller's own [`Framer`] (a stream fault
    /// that forwards each event on its own timer), `at` = time since the
    /// request started. Returns what the event carries. Not to be mixed
    /// with `feed` on one meter.
    pub fn read_event(&mut self, event: StreamEvent<'_>, at: Duration) -> EventKind {
        if self.summary.is_some() {
            return EventKind::Other;
        }
        self.reading.read(self.dialect, event, at)
    }

    /// End of the body. A last event with no blank line after it is still
    /// read, at `at`. Calling it again returns the same summary.
    pub fn finish(&mut self, at: Duration) -> MeterSummary {
        if let Some(done) = &self.summary {
            return done.clone();
        }
        if let Some(body) = self.framer.finish(|event| {
            self.reading.read(self.dialect, event, at);
        }) {
            answer::read(&mut self.reading, body);
        }
        let reading = &mut self.reading;
        reading.malformed_events = reading
            .malformed_events
            .saturating_add(self.framer.oversized());
        match self.dialect {
            Dialect::OpenAi => openai::finish(reading),
            // The status is in the trailers, which the meter does not see:
            // a clean end here is a body that stopped between messages.
            Dialect::Grpc => reading.clean_end = !self.messages.in_message(),
            _ => {}
        }
        self.summary.insert(reading.summary(self.dialect)).clone()
    }
}

/// What the meter has learned so far; the dialect readers write into it.
#[derive(Default)]
struct Reading {
    content_events: u32,
    first_content_at: Option<Duration>,
    last_content_at: Option<Duration>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    finish_reason: Option<String>,
    response_model: Option<String>,
    clean_end: bool,
    malformed_events: u32,
    /// The latest OpenAI `usage` object, raw: vLLM may send one per chunk,
    /// so it is copied (into a reused buffer) and parsed once at the end.
    openai_usage: Vec<u8>,
    /// llama.cpp's `timings` counts, used when no usage came.
    timings: Option<Tokens>,
}

impl Reading {
    fn read(&mut self, dialect: Dialect, event: StreamEvent<'_>, at: Duration) -> EventKind {
        let Some(data) = event.data.map(<[u8]>::trim_ascii) else {
            return EventKind::Other;
        };
        let kind = match dialect {
            Dialect::OpenAi => openai::read(self, data),
            Dialect::Anthropic => anthropic::read(self, event.name, data),
            Dialect::Tgi => tgi::read(self, data),
            Dialect::Ollama => ollama::read(self, data),
            Dialect::Json | Dialect::Grpc | Dialect::Unknown => EventKind::Other,
        };
        if kind == EventKind::Content {
            self.content(at);
        }
        kind
    }

    /// One content event (or gRPC message) completed at `at`.
    fn content(&mut self, at: Duration) {
        self.content_events = self.content_events.saturating_add(1);
        self.first_content_at.get_or_insert(at);
        self.last_content_at = Some(at);
    }

    /// Sets the model from the first event that names one; later events
    /// are not searched.
    fn note_model(&mut self, data: &[u8]) {
        if self.response_model.is_none() {
            if let Some(raw) = scan::MODEL.first_str(data) {
                self.response_model = scan::decode(raw);
            }
        }
    }

    /// Parses one count-carrying object; a failure counts as malformed.
    fn parse<'de, T: Deserialize<'de>>(&mut self, bytes: &'de [u8]) -> Option<T> {
        let parsed = serde_json::from_slice(bytes).ok();
        if parsed.is_none() {
            self.malformed();
        }
        parsed
    }

    fn malformed(&mut self) {
        self.malformed_events = self.malformed_events.saturating_add(1);
    }

    fn summary(&self, dialect: Dialect) -> MeterSummary {
        let streaming = !matches!(dialect, Dialect::Json | Dialect::Unknown);
        let estimated = streaming && self.output_tokens.is_none();
        MeterSummary {
            dialect,
            first_content_at: self.first_content_at,
            last_content_at: self.last_content_at,
            content_events: self.content_events,
            input_tokens: self.input_tokens,
            output_tokens: if estimated {
                Some(u64::from(self.content_events))
            } else {
                self.output_tokens
            },
            output_tokens_estimated: estimated,
            finish_reason: self.finish_reason.clone(),
            response_model: self.response_model.clone(),
            clean_end: self.clean_end,
            malformed_events: self.malformed_events,
        }
    }
}

/// Input and output token counts from one source.
#[derive(Clone, Copy, Debug, Default)]
struct Tokens {
    input: Option<u64>,
    output: Option<u64>,
}

/// A usage object in any of the spellings: OpenAI (`prompt_tokens`,
/// `completion_tokens`) or Anthropic (`input_tokens`, `output_tokens`).
#[derive(Deserialize)]
struct Usage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

impl Usage {
    fn tokens(&self) -> Tokens {
        Tokens {
            input: self.prompt_tokens.or(self.input_tokens),
            output: self.completion_tokens.or(self.output_tokens),
        }
    }
}

#[cfg(test)]
mod tests;
