//! Request handling: routing, reading the request, per-request overrides, and the answer it gets.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{HeaderMap, Method, Request, Response, StatusCode};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tracing::debug;

use super::body::{jittered, next_token, MockBody, SseStream, StreamPlan};
use super::openai::{error_body, model_list, AnswerMeta, CompletionRequest, Endpoint};
use super::record::{Recorder, SeenRequest};
use super::MockLlmOptions;

/// Bodies beyond this are refused: a test server should not buffer whatever it is sent.
const MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;

/// What every connection of one server shares.
pub(super) struct Shared {
    pub opts: MockLlmOptions,
    /// What can change while serving (the demo slows a canary down).
    pub knobs: Arc<MockKnobs>,
    /// Every request, when `opts.record` is on.
    pub recorder: Arc<Recorder>,
    /// Numbers requests in arrival order; each one's RNG is seeded from it, so a run with the
    /// same seed and the same request order draws the same errors, text and jitter, without a lock.
    requests: AtomicU64,
    /// The `max_concurrency` slots; tokio's semaphore is fair, so waiters are served FIFO.
    slots: Option<Arc<Semaphore>>,
    /// When the first completion request was read: the clock of `opts.stall`.
    first: OnceLock<Instant>,
}

/// The mock's behaviour that can be changed while it serves, lock-free.
#[derive(Debug)]
pub struct MockKnobs {
    ttft_us: AtomicU64,
    /// Error rate in parts per million.
    error_ppm: AtomicU64,
}

impl MockKnobs {
    fn new(opts: &MockLlmOptions) -> Self {
        let knobs = MockKnobs {
            ttft_us: AtomicU64::new(0),
            error_ppm: AtomicU64::new(0),
        };
        knobs.set_ttft(opts.ttft);
        knobs.set_error_rate(opts.error_rate);
        knobs
    }

    pub fn ttft(&self) -> Duration {
        Duration::from_micros(self.ttft_us.load(Ordering::Relaxed))
    }

    pub fn set_ttft(&self, ttft: Duration) {
        self.ttft_us
            .store(ttft.as_micros() as u64, Ordering::Relaxed);
    }

    pub fn error_rate(&self) -> f64 {
        self.error_ppm.load(Ordering::Relaxed) as f64 / 1e6
    }

    /// Clamped to 0.0..=1.0.
    pub fn set_error_rate(&self, rate: f64) {
        let ppm = (rate.clamp(0.0, 1.0) * 1e6).round() as u64;
        self.error_ppm.store(ppm, Ordering::Relaxed);
    }
}

impl Shared {
    pub(super) fn new(opts: MockLlmOptions) -> Self {
        Shared {
            knobs: Arc::new(MockKnobs::new(&opts)),
            slots: opts
                .max_concurrency
                .map(|n| Arc::new(Semaphore::new(n.get()))),
            recorder: Arc::new(Recorder::default()),
            opts,
            requests: AtomicU64::new(0),
            first: OnceLock::new(),
        }
    }

    /// Until when a completion read `now` is held: the stall's end when `now` falls in it.
    fn stalled_until(&self, now: Instant) -> Option<Instant> {
        let stall = self.opts.stall?;
        let first = *self.first.get_or_init(|| now);
        let (from, to) = (first + stall.at, first + stall.at + stall.lasts);
        (from <= now && now < to).then_some(to)
    }

    fn next_rng(&self) -> (u64, SmallRng) {
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        let seed = self
            .opts
            .seed
            .wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        (n, SmallRng::seed_from_u64(seed))
    }
}

/// The service function: never fails, every problem becomes an OpenAI-style error answer.
/// The body is read before routing, so that a recording mock keeps every request whole,
/// whatever its path.
pub(super) async fn handle(
    req: Request<Incoming>,
    shared: &Shared,
) -> Result<Response<MockBody>, Infallible> {
    let (parts, body) = req.into_parts();
    let bytes = match Limited::new(body, MAX_REQUEST_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            debug!(error = %e, "mock llm could not read request body");
            let msg = "request body unreadable or too large";
            return Ok(error(StatusCode::BAD_REQUEST, msg, "invalid_request_error"));
        }
    };
    if shared.opts.record {
        shared.recorder.push(SeenRequest {
            method: parts.method.clone(),
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().map(str::to_owned),
            headers: parts.headers.clone(),
            body: bytes.clone(),
        });
    }
    let endpoint = match (&parts.method, parts.uri.path()) {
        (&Method::GET, "/v1/models") => {
            let list = model_list(&shared.opts.model, unix_now());
            return Ok(json_response(StatusCode::OK, &list));
        }
        (&Method::POST, "/v1/chat/completions") => Endpoint::Chat,
        (&Method::POST, "/v1/completions") => Endpoint::Text,
        (method, path @ ("/v1/models" | "/v1/chat/completions" | "/v1/completions")) => {
            let msg = format!("Method {method} not allowed on {path}");
            return Ok(error(
                StatusCode::METHOD_NOT_ALLOWED,
                &msg,
                "invalid_request_error",
            ));
        }
        (method, path) => {
            let msg = format!("Invalid URL ({method} {path})");
            return Ok(error(StatusCode::NOT_FOUND, &msg, "invalid_request_error"));
        }
    };
    // A stall holds the request before it queues: the server is frozen, not busy.
    if let Some(until) = shared.stalled_until(Instant::now()) {
        tokio::time::sleep_until(until).await;
    }
    // Queued here, after the read, as a server queues a request it has parsed. The semaphore is
    // never closed, so `acquire_owned` cannot fail; were it to, the request would go unqueued.
    let slot = match &shared.slots {
        Some(slots) => Arc::clone(slots).acquire_owned().await.ok(),
        None => None,
    };
    Ok(complete(endpoint, &parts.headers, &bytes, shared, slot)
        .await
        .unwrap_or_else(|reject| error(reject.status, &reject.message, reject.kind)))
}

/// Why a completion request gets an error answer instead of a completion.
struct Reject {
    status: StatusCode,
    message: String,
    kind: &'static str,
}

impl Reject {
    fn bad_request(message: String) -> Self {
        Reject {
            status: StatusCode::BAD_REQUEST,
            message,
            kind: "invalid_request_error",
        }
    }
}

/// Answers a completion request; `Err` says which error answer to send instead. `slot` is held
/// until the answer is done: by the stream until its last event, or across a whole answer's wait.
async fn complete(
    endpoint: Endpoint,
    headers: &HeaderMap,
    bytes: &[u8],
    shared: &Shared,
    slot: Option<OwnedSemaphorePermit>,
) -> Result<Response<MockBody>, Reject> {
    let opts = &shared.opts;
    let ttft = header_ms(headers, "x-mock-ttft-ms")?.unwrap_or(shared.knobs.ttft());
    let error_rate = shared.knobs.error_rate();
    let itl = header_ms(headers, "x-mock-itl-ms")?.unwrap_or(opts.itl);
    let natural = header_u32(headers, "x-mock-tokens")?.unwrap_or(opts.tokens);

    let parsed: CompletionRequest = serde_json::from_slice(bytes).map_err(|e| {
        Reject::bad_request(format!(
            "We could not parse the JSON body of your request: {e}"
        ))
    })?;

    let (n, mut rng) = shared.next_rng();
    // Drawn after parsing: a malformed request is the client's fault whatever the error rate.
    if error_rate > 0.0 && rng.random::<f64>() < error_rate {
        debug!(request = n, "mock llm injecting an error");
        let msg = "The server had an error while processing your request (mock injected).";
        return Err(Reject {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: msg.to_owned(),
            kind: "server_error",
        });
    }

    let cap = parsed.token_cap();
    let tokens = cap.map_or(natural, |c| c.min(natural));
    let finish = if cap.is_some_and(|c| c < natural) {
        "length"
    } else {
        "stop"
    };
    let prefix = match endpoint {
        Endpoint::Chat => "chatcmpl-mock",
        Endpoint::Text => "cmpl-mock",
    };
    let meta = AnswerMeta {
        endpoint,
        id: format!("{prefix}-{n}"),
        created: unix_now(),
        model: parsed.model.clone().unwrap_or_else(|| opts.model.clone()),
    };
    let prompt_tokens = parsed.prompt_tokens();

    if parsed.stream.unwrap_or(false) {
        let plan = StreamPlan {
            meta,
            ttft,
            itl,
            jitter: opts.jitter,
            tokens,
            prompt_tokens,
            finish,
            include_usage: parsed.include_usage(),
        };
        let body = MockBody::Sse(Box::new(SseStream::new(plan, rng, slot)));
        let mut resp = Response::new(body);
        let headers = resp.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        return Ok(resp);
    }

    // A whole answer takes as long as the stream would have, so latency tests see a real wait.
    let mut wait = jittered(ttft, opts.jitter, &mut rng);
    let mut text = String::new();
    for i in 0..tokens {
        if i > 0 {
            wait += jittered(itl, opts.jitter, &mut rng);
        }
        text.push_str(&next_token(&mut rng));
    }
    tokio::time::sleep(wait).await;
    drop(slot);
    let answer = meta.full_answer(&text, finish, prompt_tokens, tokens);
    Ok(json_response(StatusCode::OK, &answer))
}

/// A millisecond override header; a value that is not a number is a 400, so a typo in a test
/// shows up at once instead of silently using the default.
fn header_ms(headers: &HeaderMap, name: &str) -> Result<Option<Duration>, Reject> {
    Ok(header_u64(headers, name)?.map(Duration::from_millis))
}

fn header_u32(headers: &HeaderMap, name: &str) -> Result<Option<u32>, Reject> {
    header_u64(headers, name)?
        .map(|v| u32::try_from(v).map_err(|_| bad_header(name)))
        .transpose()
}

fn header_u64(headers: &HeaderMap, name: &str) -> Result<Option<u64>, Reject> {
    let Some(value) = headers.get(name) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map(Some)
        .ok_or_else(|| bad_header(name))
}

fn bad_header(name: &str) -> Reject {
    Reject::bad_request(format!("header {name}: expected a non-negative integer"))
}

fn error(status: StatusCode, message: &str, kind: &str) -> Response<MockBody> {
    json_response(status, &error_body(message, kind))
}

fn json_response(status: StatusCode, value: &serde_json::Value) -> Response<MockBody> {
    let mut resp = Response::new(MockBody::json(value));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
