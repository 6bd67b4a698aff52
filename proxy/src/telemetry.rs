//! Distributed tracing: reads the client's W3C trace context (or starts a trace),
//! hands out the `traceparent` for each upstream attempt, and at the end of a request
//! emits a server span plus one client span per attempt to an OTLP/gRPC collector.
//!
//! The request path only draws random ids and, at the end, hands finished spans to a
//! bounded queue; export runs on a tokio runtime of its own (see `export`). A collector
//! that is down costs dropped (and counted) spans, never a slower request.

mod export;
mod spans;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rand::Rng;
use sluice_control::TelemetryConfig;
use sluice_filters::{sample, TraceContext};

use export::Pipeline;

/// Longest `tracestate` kept (the W3C limit for what a vendor must propagate).
const TRACESTATE_MAX: usize = 512;

/// The tracer of one sluice process: cheap to clone and share between threads.
/// A disabled one (no `telemetry.otlp_endpoint`) records nothing.
#[derive(Clone, Default)]
pub struct Tracer {
    inner: Option<Arc<Pipeline>>,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer")
            .field("enabled", &self.is_enabled())
            .finish()
    }
}

impl Tracer {
    /// No endpoint: a disabled tracer. With one: an OTLP/gRPC exporter behind a batch
    /// span processor, exporting on a tokio runtime on a thread of its own, so it works
    /// the same whichever runtime (pingora's, a test's, none) the caller is on. Does not
    /// wait for the collector: the connection is made on the first export.
    ///
    /// Fails only on a config the exporter cannot use (an `https` endpoint: sluice is
    /// built without TLS for OTLP) or when the export thread cannot be started.
    pub fn start(config: &TelemetryConfig) -> anyhow::Result<Tracer> {
        let Some(endpoint) = config.otlp_endpoint.as_deref() else {
            return Ok(Tracer::disabled());
        };
        let pipeline = Pipeline::start(endpoint, &config.service_name, config.sample_ratio)?;
        Ok(Tracer {
            inner: Some(Arc::new(pipeline)),
        })
    }

    /// Registers `sluice_trace_spans_{dropped,exported}_total` (only when enabled).
    pub fn register_metrics(&self, registry: &prometheus::Registry) -> prometheus::Result<()> {
        if self.is_enabled() {
            registry.register(Box::new(SpanCounters(self.clone())))?;
        }
        Ok(())
    }

    pub fn disabled() -> Tracer {
        Tracer { inner: None }
    }

    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// Called at request start with the client's raw `traceparent` / `tracestate`
    /// header values. Decides sampling (a parent's decision is followed; without one,
    /// `telemetry.sample_ratio`), keeps the trace id of a valid parent or starts a new
    /// trace, and allocates the id of this request's server span.
    ///
    /// On a disabled tracer nothing is recorded: a valid client context is carried
    /// through unchanged (attempts get the client's own `traceparent`), so a proxy that
    /// injects anyway is transparent; without one the ids are fresh and unsampled.
    pub fn begin(&self, traceparent: Option<&[u8]>, tracestate: Option<&[u8]>) -> RequestTrace {
        let parent = traceparent.and_then(TraceContext::parse);
        // A tracestate without a valid traceparent must be ignored (W3C).
        let tracestate = parent.and(tracestate).and_then(parse_tracestate);
        let mut rng = rand::rng();
        let Some(pipeline) = &self.inner else {
            return match parent {
                Some(parent) => RequestTrace {
                    context: parent,
                    sampled: false,
                    tracestate,
                    parent_span_id: Some(parent.span_id),
                    passthrough: true,
                },
                None => RequestTrace {
                    context: TraceContext {
                        trace_id: random_trace_id(&mut rng),
                        span_id: random_span_id(&mut rng),
                        sampled: false,
                    },
                    sampled: false,
                    tracestate: None,
                    parent_span_id: None,
                    passthrough: false,
                },
            };
        };
        let draw: f64 = rng.random();
        let sampled = sample(parent.as_ref(), pipeline.sample_ratio(), draw);
        let trace_id = match &parent {
            Some(p) => p.trace_id,
            None => random_trace_id(&mut rng),
        };
        RequestTrace {
            context: TraceContext {
                trace_id,
                span_id: random_span_id(&mut rng),
                sampled,
            },
            sampled,
            tracestate,
            parent_span_id: parent.map(|p| p.span_id),
            passthrough: false,
        }
    }

    /// Called once at the end of the request. Emits the server span and one client span
    /// per attempt (each with the span id that was sent upstream for it). Does nothing
    /// when the request is not sampled or the tracer is disabled. Never blocks: a full
    /// queue drops the spans and counts them.
    pub fn finish(&self, trace: &RequestTrace, request: &FinishedRequest<'_>) {
        let Some(pipeline) = &self.inner else { return };
        if !trace.sampled {
            return;
        }
        for span in spans::build(trace, request, pipeline.scope()) {
            pipeline.submit(span);
        }
    }

    /// Spans that were finished but never reached the collector: the export failed
    /// (collector down, timeout) or the queue was full. For
    /// `sluice_trace_spans_dropped_total`.
    pub fn dropped_spans(&self) -> u64 {
        self.inner.as_ref().map_or(0, |p| p.dropped())
    }

    /// Spans the collector accepted so far.
    pub fn exported_spans(&self) -> u64 {
        self.inner.as_ref().map_or(0, |p| p.exported())
    }
}

/// Exposes the tracer's span counts as Prometheus counters, read at scrape time.
struct SpanCounters(Tracer);

impl prometheus::core::Collector for SpanCounters {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        Vec::new()
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        let family = |name: &str, help: &str, value: u64| {
            let mut counter = prometheus::proto::Counter::default();
            counter.set_value(value as f64);
            let mut metric = prometheus::proto::Metric::default();
            metric.set_counter(counter);
            let mut f = prometheus::proto::MetricFamily::default();
            f.set_name(name.to_string());
            f.set_help(help.to_string());
            f.set_field_type(prometheus::proto::MetricType::COUNTER);
            f.mut_metric().push(metric);
            f
        };
        vec![
            family(
                "sluice_trace_spans_dropped_total",
                "Spans not exported: collector down or export queue full.",
                self.0.dropped_spans(),
            ),
            family(
                "sluice_trace_spans_exported_total",
                "Spans the OTLP collector accepted.",
                self.0.exported_spans(),
            ),
        ]
    }
}

/// The trace state of one request, from `begin` to `finish`.
#[derive(Clone, Debug)]
pub struct RequestTrace {
    /// The trace id and the id of this request's server span.
    pub context: TraceContext,
    /// Whether spans of this request are recorded (and the flag sent upstream).
    pub sampled: bool,
    /// The client's `tracestate`, to forward upstream unchanged.
    pub tracestate: Option<String>,
    parent_span_id: Option<[u8; 8]>,
    /// A disabled tracer carrying a client's context through: attempts reuse it as is.
    passthrough: bool,
}

/// The trace context of one upstream attempt: the id of its client span and the
/// `traceparent` to send upstream with it. Keep the span id for [`Attempt::span_id`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptTrace {
    pub span_id: [u8; 8],
    pub traceparent: String,
}

impl RequestTrace {
    /// The id of the span this request continues (the client's), if it sent one.
    pub fn parent_span_id(&self) -> Option<[u8; 8]> {
        self.parent_span_id
    }

    /// A new client span id for one upstream attempt and the `traceparent` to send with
    /// it: this trace, that span as the parent, this request's sampling flag.
    pub fn next_attempt(&mut self) -> AttemptTrace {
        if self.passthrough {
            return AttemptTrace {
                span_id: self.context.span_id,
                traceparent: self.context.to_traceparent(),
            };
        }
        let span_id = random_span_id(&mut rand::rng());
        let traceparent = TraceContext {
            trace_id: self.context.trace_id,
            span_id,
            sampled: self.sampled,
        }
        .to_traceparent();
        AttemptTrace {
            span_id,
            traceparent,
        }
    }
}

/// Everything known about a request when it ends, for its spans. Empty strings mean
/// "unknown" and leave the attribute out.
#[derive(Clone, Debug)]
pub struct FinishedRequest<'a> {
    pub start: SystemTime,
    pub end: SystemTime,
    pub method: &'a str,
    /// The request path (a query string, if passed, is cut off).
    pub path: &'a str,
    /// The status sent to the client; 0 when no response was sent.
    pub status: u16,
    pub route: &'a str,
    pub cluster: &'a str,
    pub version: &'a str,
    /// The cluster version's lineage id (`sluice.cluster.lineage_id`).
    pub lineage_id: Option<&'a str>,
    /// `gen_ai.operation.name`: `chat`, `text_completion`, `embeddings`, ...
    pub operation: &'a str,
    pub request_model: &'a str,
    pub response_model: Option<&'a str>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub finish_reason: Option<&'a str>,
    /// Time to first token (first content chunk), from the request start.
    pub ttft: Option<Duration>,
    /// A fingerprint of the prompt (never the prompt itself).
    pub prompt_fingerprint: Option<&'a str>,
    /// The `sluice load` run, for load traffic (a server span attribute).
    pub load_run: Option<&'a str>,
    /// The serving endpoint's KV-cache ratio as last scraped (`sluice.kvcache_ratio`).
    pub kvcache_ratio: Option<f64>,
    /// A short, low-cardinality error kind when the request failed.
    pub error: Option<&'a str>,
    /// A gRPC call's `rpc.*` attributes; `None` for any other request.
    pub grpc: Option<GrpcCall<'a>>,
    pub attempts: &'a [Attempt],
}

/// What the server span of a gRPC call says about it (OpenTelemetry's RPC conventions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrpcCall<'a> {
    /// `rpc.service`: `package.Service`; empty when the path is not a method's.
    pub service: &'a str,
    /// `rpc.method`.
    pub method: &'a str,
    /// `rpc.grpc.status_code`: the status it ended with, when one came.
    pub status: Option<u32>,
}

/// One upstream attempt of a request.
#[derive(Clone, Debug)]
pub struct Attempt {
    /// The span id from [`RequestTrace::next_attempt`] for this attempt.
    pub span_id: [u8; 8],
    pub start: SystemTime,
    pub end: SystemTime,
    /// The upstream peer, when one was picked.
    pub address: Option<SocketAddr>,
    /// Why the attempt failed (connect refused, timeout, ...); `None` if it answered.
    pub error: Option<String>,
}

fn random_trace_id(rng: &mut impl Rng) -> [u8; 16] {
    // Zero is the invalid id; drawing it is a 2^-128 event, but never send one.
    rng.random::<u128>().max(1).to_be_bytes()
}

fn random_span_id(rng: &mut impl Rng) -> [u8; 8] {
    rng.random::<u64>().max(1).to_be_bytes()
}

/// Keeps a `tracestate` value that can be forwarded as is: visible ASCII, not too long.
fn parse_tracestate(value: &[u8]) -> Option<String> {
    let value = value.trim_ascii();
    if value.is_empty()
        || value.len() > TRACESTATE_MAX
        || !value
            .iter()
            .all(|b| (0x20..0x7f).contains(b) || *b == b'\t')
    {
        return None;
    }
    std::str::from_utf8(value).ok().map(str::to_owned)
}
