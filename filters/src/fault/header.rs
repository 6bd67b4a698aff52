//! Faults a request asks for itself, like Envoy's `x-envoy-fault-*`: only
//! on routes with `allow_header_faults: true`, which the caller checks.

use std::time::Duration;

use crate::grpc::GRPC_MAX_STATUS;
use crate::matcher::RequestView;

pub const HEADER_DELAY: &str = "x-sluice-fault-delay";
pub const HEADER_ABORT: &str = "x-sluice-fault-abort";
/// A gRPC status (0..=16) for gRPC calls, as Envoy's
/// `x-envoy-fault-abort-grpc-request`.
pub const HEADER_ABORT_GRPC: &str = "x-sluice-fault-abort-grpc";
pub const HEADER_TOKEN_DELAY: &str = "x-sluice-fault-token-delay";

/// The longest delay a header may ask for: a client cannot hold a proxy
/// worker for longer than this.
const MAX_HEADER_DELAY: Duration = Duration::from_secs(60);

/// What the fault headers of one request ask for. Values that do not parse
/// are ignored (the request is served as if the header were absent).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeaderFault {
    pub delay: Option<Duration>,
    pub abort: Option<u16>,
    /// A gRPC status, 0..=16.
    pub abort_grpc: Option<u32>,
    pub token_delay: Option<Duration>,
}

impl HeaderFault {
    pub fn is_empty(&self) -> bool {
        *self == HeaderFault::default()
    }
}

pub fn header_faults(req: &impl RequestView) -> HeaderFault {
    let text = |name| {
        req.header(name)
            .and_then(|v| std::str::from_utf8(v).ok())
            .map(str::trim)
    };
    HeaderFault {
        delay: text(HEADER_DELAY).and_then(header_duration),
        abort: text(HEADER_ABORT)
            .and_then(|v| v.parse::<u16>().ok())
            .filter(|s| (200..=599).contains(s)),
        abort_grpc: text(HEADER_ABORT_GRPC)
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|&s| s <= GRPC_MAX_STATUS),
        token_delay: text(HEADER_TOKEN_DELAY).and_then(header_duration),
    }
}

/// `200ms`, `1.5s`, or a bare number of milliseconds; at most a minute.
fn header_duration(text: &str) -> Option<Duration> {
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else {
        (text, 1e-3)
    };
    let value: f64 = number.trim().parse().ok()?;
    let d = Duration::try_from_secs_f64(value * scale).ok()?;
    (d <= MAX_HEADER_DELAY).then_some(d)
}
