//! Tests of the tracer's request side (begin, attempts, sampling) and of the spans it
//! builds. Export to a real collector is tested end to end in `tests/e2e/otlp.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::trace::{SpanId, SpanKind, Status, TraceId};
use opentelemetry::{InstrumentationScope, Value};
use sluice_control::TelemetryConfig;
use sluice_filters::TraceContext;

use super::spans;
use super::*;

const CLIENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const CLIENT_UNSAMPLED: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";

/// A tracer exporting to a loopback port nothing listens on.
fn dead_tracer(sample_ratio: f64) -> Tracer {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    Tracer::start(&TelemetryConfig {
        otlp_endpoint: Some(format!("http://127.0.0.1:{port}")),
        sample_ratio,
        ..TelemetryConfig::default()
    })
    .unwrap()
}

#[test]
fn disabled_tracer_carries_the_client_context_through() {
    let tracer = Tracer::start(&TelemetryConfig::default()).unwrap();
    assert!(!tracer.is_enabled());
    let mut trace = tracer.begin(Some(CLIENT.as_bytes()), Some(b"vendor=1"));
    assert!(!trace.sampled);
    assert_eq!(trace.tracestate.as_deref(), Some("vendor=1"));
    assert_eq!(trace.next_attempt().traceparent, CLIENT);
    tracer.finish(&trace, &finished(&[]));
    assert_eq!(tracer.dropped_spans(), 0);

    let mut fresh = tracer.begin(None, Some(b"vendor=1"));
    assert!(!fresh.sampled);
    assert_eq!(fresh.tracestate, None);
    let attempt = TraceContext::parse(fresh.next_attempt().traceparent.as_bytes()).unwrap();
    assert_eq!(attempt.trace_id, fresh.context.trace_id);
    assert!(!attempt.sampled);
}

#[test]
fn begin_follows_the_parent_and_the_ratio() {
    let client = TraceContext::parse(CLIENT.as_bytes()).unwrap();

    let all = dead_tracer(1.0);
    let trace = all.begin(Some(CLIENT.as_bytes()), Some(b" a=b,c=d "));
    assert!(trace.sampled && trace.context.sampled);
    assert_eq!(trace.context.trace_id, client.trace_id);
    assert_ne!(trace.context.span_id, client.span_id);
    assert_eq!(trace.parent_span_id(), Some(client.span_id));
    assert_eq!(trace.tracestate.as_deref(), Some("a=b,c=d"));
    // An unsampled parent wins over the ratio.
    assert!(!all.begin(Some(CLIENT_UNSAMPLED.as_bytes()), None).sampled);
    // A broken traceparent starts a new trace and drops the tracestate.
    let broken = all.begin(Some(b"00-zz"), Some(b"a=b"));
    assert!(broken.sampled);
    assert_ne!(broken.context.trace_id, client.trace_id);
    assert_eq!(broken.parent_span_id(), None);
    assert_eq!(broken.tracestate, None);

    let none = dead_tracer(0.0);
    assert!(!none.begin(None, None).sampled);
    // A sampled parent wins over the ratio.
    assert!(none.begin(Some(CLIENT.as_bytes()), None).sampled);
}

#[test]
fn each_attempt_gets_its_own_span_in_the_same_trace() {
    let tracer = dead_tracer(1.0);
    let mut trace = tracer.begin(Some(CLIENT.as_bytes()), None);
    let first = trace.next_attempt();
    let second = trace.next_attempt();
    assert_ne!(first.span_id, second.span_id);
    for attempt in [&first, &second] {
        let sent = TraceContext::parse(attempt.traceparent.as_bytes()).unwrap();
        assert_eq!(sent.trace_id, trace.context.trace_id);
        assert_eq!(sent.span_id, attempt.span_id);
        assert!(sent.sampled);
        assert_ne!(sent.span_id, trace.context.span_id);
    }
}

#[test]
fn exporter_down_drops_and_counts_without_blocking() {
    let tracer = dead_tracer(1.0);
    let mut trace = tracer.begin(None, None);
    let attempt = trace.next_attempt();
    let attempts = [Attempt {
        span_id: attempt.span_id,
        start: SystemTime::now(),
        end: SystemTime::now(),
        address: None,
        error: None,
    }];
    let started = Instant::now();
    for _ in 0..100 {
        tracer.finish(&trace, &finished(&attempts));
    }
    assert!(started.elapsed() < Duration::from_secs(1), "finish blocked");
    let deadline = Instant::now() + Duration::from_secs(20);
    while tracer.dropped_spans() < 200 {
        assert!(
            Instant::now() < deadline,
            "dropped {}",
            tracer.dropped_spans()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(tracer.exported_spans(), 0);
    // Dropping a tracer whose collector is down returns in bounded time.
    let started = Instant::now();
    drop(tracer);
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn spans_carry_ids_parents_and_genai_attributes() {
    let tracer = dead_tracer(1.0);
    let mut trace = tracer.begin(Some(CLIENT.as_bytes()), Some(b"k=v"));
    let start = SystemTime::now();
    let failed = trace.next_attempt();
    let answered = trace.next_attempt();
    let upstream: SocketAddr = "127.0.0.1:8001".parse().unwrap();
    let attempts = [
        Attempt {
            span_id: failed.span_id,
            start,
            end: start + Duration::from_millis(3),
            address: Some("127.0.0.1:8000".parse().unwrap()),
            error: Some("connect_refused".into()),
        },
        Attempt {
            span_id: answered.span_id,
            start: start + Duration::from_millis(4),
            end: start + Duration::from_millis(90),
            address: Some(upstream),
            error: None,
        },
    ];
    let request = finished(&attempts);
    let built = spans::build(
        &trace,
        &request,
        &InstrumentationScope::builder("t").build(),
    );
    assert_eq!(built.len(), 3);

    let server = &built[0];
    let client = TraceContext::parse(CLIENT.as_bytes()).unwrap();
    assert_eq!(server.span_kind, SpanKind::Server);
    assert_eq!(server.name, "POST chat");
    assert_eq!(
        server.span_context.trace_id(),
        TraceId::from_bytes(client.trace_id)
    );
    assert_eq!(
        server.span_context.span_id(),
        SpanId::from_bytes(trace.context.span_id)
    );
    assert_eq!(server.parent_span_id, SpanId::from_bytes(client.span_id));
    assert!(server.parent_span_is_remote);
    assert_eq!(server.span_context.trace_state().get("k"), Some("v"));
    assert_eq!(server.status, Status::Unset);
    let attrs = attributes(server);
    assert_eq!(attrs["http.request.method"], "POST");
    assert_eq!(attrs["url.path"], "/v1/chat/completions");
    assert_eq!(attrs["http.response.status_code"], "200");
    assert_eq!(attrs["sluice.route"], "chat");
    assert_eq!(attrs["sluice.cluster"], "llm-stable");
    assert_eq!(attrs["sluice.version"], "v1");
    assert_eq!(attrs["sluice.cluster.lineage_id"], "0123456789abcdef");
    assert_eq!(attrs["gen_ai.operation.name"], "chat");
    assert_eq!(attrs["gen_ai.request.model"], "smol");
    assert_eq!(attrs["gen_ai.response.model"], "smol-135m");
    assert_eq!(attrs["gen_ai.usage.input_tokens"], "7");
    assert_eq!(attrs["gen_ai.usage.output_tokens"], "12");
    assert_eq!(attrs["gen_ai.response.finish_reasons"], "[\"stop\"]");
    assert_eq!(attrs["gen_ai.response.time_to_first_chunk"], "0.25");
    assert_eq!(attrs["sluice.prompt_fingerprint"], "fp-1234");
    assert_eq!(attrs["sluice.load_run"], "load-run-7");
    assert_eq!(attrs["sluice.kvcache_ratio"], "0.5");
    assert!(!attrs.contains_key("error.type"));

    for (span, attempt) in built[1..].iter().zip(&attempts) {
        assert_eq!(span.span_kind, SpanKind::Client);
        assert_eq!(span.name, "chat smol");
        assert_eq!(
            span.span_context.trace_id(),
            TraceId::from_bytes(client.trace_id)
        );
        assert_eq!(
            span.span_context.span_id(),
            SpanId::from_bytes(attempt.span_id)
        );
        assert_eq!(span.parent_span_id, server.span_context.span_id());
        assert!(!span.parent_span_is_remote);
        assert_eq!(span.start_time, attempt.start);
        assert_eq!(span.end_time, attempt.end);
    }
    let failed_attrs = attributes(&built[1]);
    assert_eq!(failed_attrs["error.type"], "connect_refused");
    assert_eq!(failed_attrs["server.port"], "8000");
    assert_eq!(failed_attrs["sluice.attempt"], "1");
    assert_eq!(
        failed_attrs["sluice.cluster.lineage_id"],
        "0123456789abcdef"
    );
    assert!(!failed_attrs.contains_key("gen_ai.usage.output_tokens"));
    assert!(matches!(built[1].status, Status::Error { .. }));
    let answered_attrs = attributes(&built[2]);
    assert_eq!(answered_attrs["server.address"], "127.0.0.1");
    assert_eq!(answered_attrs["server.port"], "8001");
    assert_eq!(answered_attrs["gen_ai.usage.output_tokens"], "12");
    assert_eq!(
        answered_attrs["gen_ai.response.time_to_first_chunk"],
        "0.25"
    );
    assert_eq!(answered_attrs["http.response.status_code"], "200");
    assert!(!answered_attrs.contains_key("error.type"));
    assert_eq!(built[2].status, Status::Unset);
}

#[test]
fn failed_requests_mark_the_server_span() {
    let tracer = dead_tracer(1.0);
    let trace = tracer.begin(None, None);
    let mut request = finished(&[]);
    request.status = 502;
    request.error = Some("upstream_connect");
    request.route = "";
    let built = spans::build(
        &trace,
        &request,
        &InstrumentationScope::builder("t").build(),
    );
    assert_eq!(built.len(), 1);
    assert_eq!(built[0].name, "sluice.request");
    assert_eq!(built[0].parent_span_id, SpanId::INVALID);
    assert!(!built[0].parent_span_is_remote);
    assert_eq!(attributes(&built[0])["error.type"], "upstream_connect");
    assert!(matches!(built[0].status, Status::Error { .. }));
}

#[test]
fn grpc_calls_carry_the_rpc_attributes() {
    let tracer = dead_tracer(1.0);
    let trace = tracer.begin(None, None);
    let mut request = finished(&[]);
    request.path = "/grpc.health.v1.Health/Check";
    request.grpc = Some(GrpcCall {
        service: "grpc.health.v1.Health",
        method: "Check",
        status: Some(14),
    });
    let scope = InstrumentationScope::builder("t").build();
    let attrs = attributes(&spans::build(&trace, &request, &scope)[0]);
    assert_eq!(attrs["rpc.system"], "grpc");
    assert_eq!(attrs["rpc.service"], "grpc.health.v1.Health");
    assert_eq!(attrs["rpc.method"], "Check");
    assert_eq!(attrs["rpc.grpc.status_code"], "14");
    // A gRPC call on a path that is no method's, with no status: the system only.
    request.grpc = Some(GrpcCall {
        service: "",
        method: "",
        status: None,
    });
    let attrs = attributes(&spans::build(&trace, &request, &scope)[0]);
    assert_eq!(attrs["rpc.system"], "grpc");
    assert!(!attrs.contains_key("rpc.service") && !attrs.contains_key("rpc.grpc.status_code"));
    // Other requests: none of them.
    let attrs = attributes(&spans::build(&trace, &finished(&[]), &scope)[0]);
    assert!(!attrs.keys().any(|k| k.starts_with("rpc.")), "{attrs:?}");
}

fn finished(attempts: &[Attempt]) -> FinishedRequest<'_> {
    let start = SystemTime::now();
    FinishedRequest {
        start,
        end: start + Duration::from_millis(100),
        method: "POST",
        path: "/v1/chat/completions?api-version=1",
        status: 200,
        route: "chat",
        cluster: "llm-stable",
        version: "v1",
        lineage_id: Some("0123456789abcdef"),
        operation: "chat",
        request_model: "smol",
        response_model: Some("smol-135m"),
        input_tokens: Some(7),
        output_tokens: Some(12),
        finish_reason: Some("stop"),
        ttft: Some(Duration::from_millis(250)),
        prompt_fingerprint: Some("fp-1234"),
        load_run: Some("load-run-7"),
        kvcache_ratio: Some(0.5),
        error: None,
        grpc: None,
        attempts,
    }
}

fn attributes(span: &opentelemetry_sdk::trace::SpanData) -> HashMap<String, String> {
    span.attributes
        .iter()
        .map(|kv| {
            let value = match &kv.value {
                Value::Array(a) => format!("{a}"),
                v => v.to_string(),
            };
            (kv.key.to_string(), value)
        })
        .collect()
}
