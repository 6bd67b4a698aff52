//! The response bodies: a whole JSON answer, or an SSE stream paced by its own timer.
//!
//! The stream is pulled, not pushed: hyper polls it, it sleeps until the next token is due and
//! then yields exactly one event as one frame. Each `Pending` between events makes hyper flush, so
//! every event leaves as its own chunk at its own time. No producer task exists, so a client that
//! goes away simply drops the body and the stream ends with nothing left running.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use rand::rngs::SmallRng;
use rand::Rng;
use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};

use super::openai::{AnswerMeta, Endpoint};

/// Words the mock "generates"; any fixed list works, it only has to look like text.
const WORDS: &[&str] = &[
    "the",
    "quick",
    "model",
    "streams",
    "tokens",
    "through",
    "a",
    "sidecar",
    "proxy",
    "while",
    "latency",
    "stays",
    "low",
    "and",
    "every",
    "chunk",
    "arrives",
    "on",
    "time",
    "with",
    "its",
    "own",
    "timestamp",
    "so",
    "gateways",
    "can",
    "measure",
    "first",
    "token",
    "gaps",
    "between",
    "them",
];

/// One output token: a word with its leading space, as BPE tokenisers emit them.
pub(super) fn next_token(rng: &mut SmallRng) -> String {
    let word = WORDS[rng.random_range(0..WORDS.len())];
    format!(" {word}")
}

/// `base` moved by a uniform draw in `-jitter..=jitter`, never below zero.
pub(super) fn jittered(base: Duration, jitter: Duration, rng: &mut SmallRng) -> Duration {
    if jitter.is_zero() {
        return base;
    }
    let j = jitter.as_secs_f64();
    let secs = base.as_secs_f64() + rng.random_range(-j..=j);
    Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(base)
}

/// The body of every answer, so one response type serves both shapes without boxing.
pub(super) enum MockBody {
    Full(Option<Bytes>),
    Sse(Box<SseStream>),
}

impl MockBody {
    pub(super) fn json(value: &Value) -> Self {
        MockBody::Full(Some(Bytes::from(value.to_string())))
    }
}

impl Body for MockBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            MockBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            MockBody::Sse(stream) => stream.poll_event(cx).map(|e| e.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            MockBody::Full(bytes) => bytes.is_none(),
            MockBody::Sse(stream) => matches!(stream.phase, Phase::Finished),
        }
    }

    /// An exact hint lets hyper send `content-length` for whole answers instead of chunking.
    fn size_hint(&self) -> SizeHint {
        match self {
            MockBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            MockBody::Full(None) => SizeHint::with_exact(0),
            MockBody::Sse(_) => SizeHint::default(),
        }
    }
}

/// Where the stream is; each phase yields at most one event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Role,
    Content,
    Usage,
    Done,
    Finished,
}

/// Everything one streamed answer needs, fixed when the request is parsed.
pub(super) struct StreamPlan {
    pub meta: AnswerMeta,
    pub ttft: Duration,
    pub itl: Duration,
    pub jitter: Duration,
    pub tokens: u32,
    pub prompt_tokens: u32,
    pub finish: &'static str,
    pub include_usage: bool,
}

pub(super) struct SseStream {
    plan: StreamPlan,
    rng: SmallRng,
    phase: Phase,
    sent: u32,
    sleep: Pin<Box<Sleep>>,
    /// The server's `max_concurrency` slot, given back once the last event is out.
    slot: Option<OwnedSemaphorePermit>,
}

impl SseStream {
    /// The TTFT clock starts here, when the request has been read, as a server's prefill would.
    pub(super) fn new(
        plan: StreamPlan,
        mut rng: SmallRng,
        slot: Option<OwnedSemaphorePermit>,
    ) -> Self {
        let ttft = jittered(plan.ttft, plan.jitter, &mut rng);
        let phase = match plan.meta.endpoint {
            Endpoint::Chat => Phase::Role,
            Endpoint::Text => Phase::Content,
        };
        SseStream {
            plan,
            rng,
            phase,
            sent: 0,
            sleep: Box::pin(tokio::time::sleep(ttft)),
            slot,
        }
    }

    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let include_usage = self.plan.include_usage;
        let event = match self.phase {
            Phase::Role => {
                self.phase = Phase::Content;
                self.plan.meta.role_chunk(include_usage)
            }
            Phase::Content => {
                if self.sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.content_event()
            }
            Phase::Usage => {
                self.phase = Phase::Done;
                self.plan
                    .meta
                    .usage_chunk(self.plan.prompt_tokens, self.plan.tokens)
            }
            Phase::Done => {
                self.phase = Phase::Finished;
                self.slot = None;
                return Poll::Ready(Some(Bytes::from_static(b"data: [DONE]\n\n")));
            }
            Phase::Finished => return Poll::Ready(None),
        };
        Poll::Ready(Some(Bytes::from(format!("data: {event}\n\n"))))
    }

    /// The next content chunk, and the timer for the one after it. A zero-token answer still
    /// sends one chunk (empty text) so the client learns the finish reason.
    fn content_event(&mut self) -> Value {
        let total = self.plan.tokens;
        let text = if total == 0 {
            String::new()
        } else {
            next_token(&mut self.rng)
        };
        self.sent += 1;
        let last = self.sent >= total;
        let finish = last.then_some(self.plan.finish);
        if last {
            self.phase = if self.plan.include_usage {
                Phase::Usage
            } else {
                Phase::Done
            };
        } else {
            let gap = jittered(self.plan.itl, self.plan.jitter, &mut self.rng);
            self.sleep.as_mut().reset(Instant::now() + gap);
        }
        self.plan
            .meta
            .content_chunk(&text, finish, self.plan.include_usage)
    }
}
