//! The one per-request outcome record: what the metrics, the access log, the
//! stats windows and (later) the rollout controller all read.

use std::time::Duration;

use crate::failure::Failure;
use crate::genai::Operation;
use crate::meter::MeterSummary;

/// Token timing and counts of an answer the token meter read: the meter's
/// summary plus the gaps the proxy saw between content chunks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TokenOutcome {
    pub summary: MeterSummary,
    /// Every gap between content chunks, in order.
    pub gaps: Vec<Duration>,
}

impl TokenOutcome {
    /// Time to first token: the first chunk that carried content.
    pub fn ttft(&self) -> Option<Duration> {
        self.summary.first_content_at
    }

    /// TPOT = (E2E − TTFT) / (output tokens − 1), vLLM's definition; `None`
    /// without a TTFT or with fewer than two tokens.
    pub fn tpot(&self, e2e: Duration) -> Option<Duration> {
        let ttft = self.ttft()?;
        let tokens = self.summary.output_tokens?;
        if tokens < 2 || e2e < ttft {
            return None;
        }
        Some((e2e - ttft) / (tokens - 1) as u32)
    }
}

/// Where a request's time went before the upstream answered, each point
/// measured from the request's start (the last attempt's, after retries).
/// Kept only when an access log is on.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UpstreamTiming {
    /// An endpoint was picked.
    pub peer: Option<Duration>,
    /// The connection was ready: a new one connected, or a pooled one taken.
    pub connected: Option<Duration>,
    /// Whether that connection came from the pool.
    pub reused: Option<bool>,
    /// The answer's head arrived.
    pub header: Option<Duration>,
}

/// One finished request, borrowed from the request's context.
#[derive(Clone, Debug)]
pub struct RequestRecord<'a> {
    pub request_id: &'a str,
    pub route: &'a str,
    pub cluster: &'a str,
    pub version: &'a str,
    /// The requested model, or "unknown".
    pub model: &'a str,
    pub operation: Operation,
    pub method: &'a str,
    pub path: &'a str,
    /// 0 when no answer reached the client.
    pub status: u16,
    pub e2e: Duration,
    pub failure: Option<Failure>,
    pub tokens: Option<&'a TokenOutcome>,
    pub prompt_fingerprint: Option<&'a str>,
    pub upstream: UpstreamTiming,
    /// The `sluice load` run this request belongs to, when its
    /// `x-sluice-load` mark was believed (see `load`).
    pub load_run: Option<&'a str>,
    /// A gRPC call's `grpc-status` (the upstream's, or the proxy's own
    /// error's); `None` for other requests, and for a call that ended
    /// without one.
    pub grpc_status: Option<u32>,
    /// A gRPC call's method, `package.Service/Method` (`unknown` for a path
    /// that is not one); `None` for other requests.
    pub grpc_method: Option<&'a str>,
    /// The KV-cache usage (0..1) of the endpoint that served it, as the
    /// upstream scrape last read it; `None` when unknown (not scraped, the
    /// last scrape failed, or the server has no such gauge).
    pub kvcache_ratio: Option<f64>,
}

impl RequestRecord<'_> {
    pub fn tpot(&self) -> Option<Duration> {
        self.tokens?.tpot(self.e2e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(ttft_ms: u64, tokens: u64) -> TokenOutcome {
        TokenOutcome {
            summary: MeterSummary {
                first_content_at: Some(Duration::from_millis(ttft_ms)),
                output_tokens: Some(tokens),
                ..MeterSummary::default()
            },
            gaps: Vec::new(),
        }
    }

    #[test]
    fn tpot_follows_vllm() {
        let e2e = Duration::from_millis(600);
        assert_eq!(outcome(100, 11).tpot(e2e), Some(Duration::from_millis(50)));
        assert_eq!(outcome(100, 1).tpot(e2e), None);
        assert_eq!(TokenOutcome::default().tpot(e2e), None);
    }
}
