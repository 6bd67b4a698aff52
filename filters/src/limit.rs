//! Token-aware rate limits, the arithmetic only: per-minute token buckets,
//! admission with a reservation of the answer's tokens, and the settlement
//! with what the answer cost. Callers pass the time in (`now_ms`) and keep
//! the state; nothing here reads a clock or takes a lock.

mod fleet;
mod metrics;

pub use fleet::{
    peer_ms, FleetAsks, FleetBucket, FleetKey, Lease, LeaseAsk, LeaseGrant, FLEET_KINDS,
};
pub use metrics::{LimitMetrics, LimitRouteMetrics, LimitStoreMetrics};

/// Every limit is per minute; a bucket refills continuously at `limit`
/// per 60 s and holds at most `limit`.
pub const WINDOW_MS: u64 = 60_000;

/// What a limit's key is made of (`limits.descriptor`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Descriptor {
    /// The route as a whole: one budget for everyone.
    Route,
    /// The request's model.
    Model,
    /// A request header's value (lower-case name), e.g. a tenant or key name.
    Header(String),
}

impl Descriptor {
    /// Reads `route`, `model` or `header:NAME`.
    pub fn parse(text: &str) -> Option<Descriptor> {
        match text {
            "route" => Some(Descriptor::Route),
            "model" => Some(Descriptor::Model),
            _ => {
                let name = text.strip_prefix("header:")?.trim();
                let valid = !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
                valid.then(|| Descriptor::Header(name.to_ascii_lowercase()))
            }
        }
    }

    /// The form as written in the config, for the `descriptor` label.
    pub fn form(&self) -> String {
        match self {
            Descriptor::Route => "route".into(),
            Descriptor::Model => "model".into(),
            Descriptor::Header(h) => format!("header:{h}"),
        }
    }
}

/// The key of one request's budget: the descriptors' values joined by `\u{1f}`,
/// a missing header or model as the empty string (those requests share one
/// budget, they are not let through unlimited).
pub fn limit_key<'a>(
    descriptors: &[Descriptor],
    route: &str,
    model: Option<&str>,
    header: impl Fn(&str) -> Option<&'a [u8]>,
) -> String {
    let mut key = String::new();
    for (i, d) in descriptors.iter().enumerate() {
        if i > 0 {
            key.push('\u{1f}');
        }
        match d {
            Descriptor::Route => key.push_str(route),
            Descriptor::Model => key.push_str(model.unwrap_or("")),
            Descriptor::Header(h) => {
                key.push_str(&String::from_utf8_lossy(header(h).unwrap_or_default()))
            }
        }
    }
    key
}

/// The configured limits of a route; `None` is no limit of that kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub requests_per_minute: Option<u64>,
    pub input_tokens_per_minute: Option<u64>,
    pub output_tokens_per_minute: Option<u64>,
    pub total_tokens_per_minute: Option<u64>,
    pub concurrent_streams: Option<u64>,
}

/// Tokens of one request: estimated or reserved at admission, counted at the end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    pub input: u64,
    pub output: u64,
}

impl Cost {
    pub fn total(&self) -> u64 {
        self.input + self.output
    }
}

/// A per-minute bucket. Its level may go below zero when an answer cost
/// more than was reserved: the debt is paid back by the refill.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bucket {
    level: f64,
    at_ms: u64,
}

impl Bucket {
    pub fn full(limit: u64, now_ms: u64) -> Self {
        Bucket {
            level: limit as f64,
            at_ms: now_ms,
        }
    }

    fn refill(&mut self, limit: u64, now_ms: u64) {
        let elapsed = now_ms.saturating_sub(self.at_ms);
        self.level =
            (self.level + limit as f64 * elapsed as f64 / WINDOW_MS as f64).min(limit as f64);
        self.at_ms = self.at_ms.max(now_ms);
    }

    /// Whole tokens (or requests) left, never below zero.
    pub fn remaining(&self) -> u64 {
        self.level.max(0.0).floor() as u64
    }

    /// Milliseconds until `need` is available (0 when it is now).
    fn wait_for(&self, need: u64, limit: u64) -> u64 {
        let deficit = need as f64 - self.level;
        if deficit <= 0.0 {
            0
        } else {
            (deficit * WINDOW_MS as f64 / limit as f64).ceil() as u64
        }
    }

    /// Milliseconds until the bucket is full again.
    fn reset_ms(&self, limit: u64) -> u64 {
        self.wait_for(limit, limit)
    }

    fn take(&mut self, amount: u64) {
        self.level -= amount as f64;
    }

    fn give(&mut self, amount: u64, limit: u64) {
        self.level = (self.level + amount as f64).min(limit as f64);
    }
}

/// One key's state: a bucket per kind of limit and the open streams.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyState {
    requests: Bucket,
    input: Bucket,
    output: Bucket,
    total: Bucket,
    pub streams: u64,
}

/// Which limit refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitKind {
    Requests,
    InputTokens,
    OutputTokens,
    TotalTokens,
    ConcurrentStreams,
}

impl LimitKind {
    /// The OpenAI error body's `type` for this limit.
    pub fn error_type(self) -> &'static str {
        match self {
            LimitKind::Requests => "requests",
            LimitKind::ConcurrentStreams => "concurrent_streams",
            _ => "tokens",
        }
    }

    pub fn key(self) -> &'static str {
        match self {
            LimitKind::Requests => "requests_per_minute",
            LimitKind::InputTokens => "input_tokens_per_minute",
            LimitKind::OutputTokens => "output_tokens_per_minute",
            LimitKind::TotalTokens => "total_tokens_per_minute",
            LimitKind::ConcurrentStreams => "concurrent_streams",
        }
    }
}

/// The `x-ratelimit-*` values OpenAI clients read. The token figures are
/// those of `total_tokens_per_minute`, else the output, else the input limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateHeaders {
    /// `(limit, remaining, reset_ms)` of the request limit.
    pub requests: Option<(u64, u64, u64)>,
    /// `(limit, remaining, reset_ms)` of the token limit.
    pub tokens: Option<(u64, u64, u64)>,
}

/// The answer to one request's admission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Allowed(RateHeaders),
    Limited {
        kind: LimitKind,
        /// When the limit would let this request through (ms from now).
        retry_after_ms: u64,
        headers: RateHeaders,
    },
    /// A fleet-wide budget whose store cannot be reached, on a route whose
    /// `on_unavailable` is `closed`: refused until the store answers again.
    StoreUnavailable {
        retry_after_ms: u64,
    },
}

/// A settled answer: the tokens charged beyond the reservation, and the
/// reserved tokens given back (total tokens).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settled {
    pub extra: u64,
    pub refunded: u64,
}

/// How long a client is told to wait when every stream slot is taken: a
/// slot frees when some answer ends, which nothing here can foresee.
pub const STREAM_RETRY_MS: u64 = 1_000;

impl KeyState {
    pub fn new(limits: &Limits, now_ms: u64) -> Self {
        let full = |l: Option<u64>| Bucket::full(l.unwrap_or(0), now_ms);
        KeyState {
            requests: full(limits.requests_per_minute),
            input: full(limits.input_tokens_per_minute),
            output: full(limits.output_tokens_per_minute),
            total: full(limits.total_tokens_per_minute),
            streams: 0,
        }
    }

    fn buckets(
        &mut self,
        limits: &Limits,
        cost: Cost,
    ) -> [(LimitKind, Option<u64>, &mut Bucket, u64); 4] {
        [
            (
                LimitKind::Requests,
                limits.requests_per_minute,
                &mut self.requests,
                1,
            ),
            (
                LimitKind::InputTokens,
                limits.input_tokens_per_minute,
                &mut self.input,
                cost.input,
            ),
            (
                LimitKind::OutputTokens,
                limits.output_tokens_per_minute,
                &mut self.output,
                cost.output,
            ),
            (
                LimitKind::TotalTokens,
                limits.total_tokens_per_minute,
                &mut self.total,
                cost.total(),
            ),
        ]
    }

    /// Admits a request that reserves `reserved` (the prompt's estimate and
    /// `max_tokens` or the default): all its limits are taken from at once,
    /// or none. A cost above a limit's whole minute is let through when the
    /// bucket is full (else it could never pass), and leaves it in debt.
    pub fn admit(&mut self, limits: &Limits, reserved: Cost, now_ms: u64) -> Decision {
        let mut refused: Option<(LimitKind, u64)> = None;
        for (kind, limit, bucket, cost) in self.buckets(limits, reserved) {
            let Some(limit) = limit else { continue };
            bucket.refill(limit, now_ms);
            let wait = bucket.wait_for(cost.min(limit), limit);
            if wait > 0 && refused.is_none_or(|(_, w)| wait > w) {
                refused = Some((kind, wait));
            }
        }
        if refused.is_none() {
            if let Some(max) = limits.concurrent_streams {
                if self.streams >= max {
                    refused = Some((LimitKind::ConcurrentStreams, STREAM_RETRY_MS));
                }
            }
        }
        if let Some((kind, retry_after_ms)) = refused {
            return Decision::Limited {
                kind,
                retry_after_ms,
                headers: self.headers(limits),
            };
        }
        for (_, limit, bucket, cost) in self.buckets(limits, reserved) {
            if limit.is_some() {
                bucket.take(cost);
            }
        }
        self.streams += 1;
        Decision::Allowed(self.headers(limits))
    }

    /// Takes a request that a fleet lease admitted from these buckets too,
    /// without asking them, so that they stand as this sluice's own traffic
    /// left them when the route falls back to local decisions.
    pub fn charge(&mut self, limits: &Limits, reserved: Cost, now_ms: u64) {
        for (_, limit, bucket, cost) in self.buckets(limits, reserved) {
            if let Some(limit) = limit {
                bucket.refill(limit, now_ms);
                bucket.take(cost);
            }
        }
        self.streams += 1;
    }

    /// Whether every stream slot is taken.
    pub fn streams_full(&self, limits: &Limits) -> bool {
        limits
            .concurrent_streams
            .is_some_and(|max| self.streams >= max)
    }

    /// Ends an admitted request: each token bucket is charged what the
    /// answer cost beyond its reservation, or given back what it did not use.
    pub fn settle(
        &mut self,
        limits: &Limits,
        reserved: Cost,
        actual: Cost,
        now_ms: u64,
    ) -> Settled {
        self.streams = self.streams.saturating_sub(1);
        let actual_costs = self.buckets(limits, actual).map(|(_, _, _, c)| c);
        for ((_, limit, bucket, reserved), actual) in self
            .buckets(limits, reserved)
            .into_iter()
            .zip(actual_costs)
            .skip(1)
        {
            let Some(limit) = limit else { continue };
            bucket.refill(limit, now_ms);
            if actual >= reserved {
                bucket.take(actual - reserved);
            } else {
                bucket.give(reserved - actual, limit);
            }
        }
        Settled {
            extra: actual.total().saturating_sub(reserved.total()),
            refunded: reserved.total().saturating_sub(actual.total()),
        }
    }

    #[cfg(test)]
    fn remaining_total(&self) -> u64 {
        self.total.remaining()
    }

    pub fn headers(&self, limits: &Limits) -> RateHeaders {
        let of = |b: &Bucket, l: u64| (l, b.remaining().min(l), b.reset_ms(l));
        let tokens = limits
            .total_tokens_per_minute
            .map(|l| of(&self.total, l))
            .or(limits.output_tokens_per_minute.map(|l| of(&self.output, l)))
            .or(limits.input_tokens_per_minute.map(|l| of(&self.input, l)));
        RateHeaders {
            requests: limits.requests_per_minute.map(|l| of(&self.requests, l)),
            tokens,
        }
    }
}

/// A reset time as OpenAI writes it: `120ms`, `1s`, `6m0s`.
pub fn format_reset(ms: u64) -> String {
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    let secs = ms.div_ceil(1_000);
    match secs / 60 {
        0 => format!("{secs}s"),
        m => format!("{m}m{}s", secs % 60),
    }
}

/// `retry-after` in whole seconds, rounded up, at least 1.
pub fn retry_after_secs(ms: u64) -> u64 {
    ms.div_ceil(1_000).max(1)
}

/// The prompt's tokens as estimated before the server counts them: a
/// quarter of its characters, rounded up (OpenAI's rule of thumb).
pub fn estimate_input_tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(4)
}

/// The OpenAI error body of a refused request, so the SDKs raise `RateLimitError`.
pub fn limited_body(kind: LimitKind, retry_after_ms: u64) -> String {
    let message = format!(
        "Rate limit reached ({}). Please try again in {}.",
        kind.key(),
        format_reset(retry_after_ms)
    );
    serde_json::json!({
        "error": {
            "message": message,
            "type": kind.error_type(),
            "param": null,
            "code": "rate_limit_exceeded",
        }
    })
    .to_string()
}

/// The body of a request refused because a fleet-wide budget's store cannot
/// be reached and the route fails closed (a 503, not the client's budget).
pub fn store_down_body() -> String {
    serde_json::json!({
        "error": {
            "message": "The rate limit store is unavailable. Please try again shortly.",
            "type": "ratelimit_store_unavailable",
            "param": null,
            "code": "ratelimit_store_unavailable",
        }
    })
    .to_string()
}

#[cfg(test)]
mod tests;
