//! Distributed tracing against a real OTLP/gRPC collector (rotel): the spans of a
//! request arrive in the client's trace, the client span carries the id that was sent
//! upstream in `traceparent`, and a collector that is down costs only counted drops.

pub(crate) mod collector;

use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use sluice_control::TelemetryConfig;
use sluice_filters::TraceContext;
use sluice_proxy::{Attempt, FinishedRequest, Sluice, Tracer};

use crate::harness;
use crate::support::{self, free_port, NamedUpstream};
use collector::{Collector, ReceivedSpan};

const CLIENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

async fn collector() -> Option<Collector> {
    let agent = collector::rotel_agent();
    if !support::require("rotel OTLP collector (pip rotel in .venv)", agent.is_some()) {
        return None;
    }
    Some(Collector::start(&agent?).await.expect("rotel starts"))
}

/// The server span continues the client's span `client`; the client span is its child
/// and has exactly the id the upstream received as its parent (`seen`).
fn assert_linked(
    server: &ReceivedSpan,
    upstream: &ReceivedSpan,
    client: &TraceContext,
    seen: &TraceContext,
) {
    assert_eq!(server.service, "sluice-e2e");
    assert_eq!(server.parent_id, client.span_id_hex());
    assert_eq!(upstream.id, seen.span_id_hex());
    assert_eq!(upstream.parent_id, server.id);
}

fn tracer(endpoint: String) -> Tracer {
    Tracer::start(&TelemetryConfig {
        otlp_endpoint: Some(endpoint),
        sample_ratio: 1.0,
        service_name: "sluice-e2e".into(),
        ..TelemetryConfig::default()
    })
    .expect("tracer starts")
}

/// The tracer the way the proxy drives it: begin with the client's headers, one
/// upstream attempt that carries the injected `traceparent` to a real upstream, finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_reach_the_collector_in_the_clients_trace() {
    let Some(collector) = collector().await else {
        return;
    };
    let client = TraceContext::parse(CLIENT.as_bytes()).unwrap();
    let tracer = tracer(collector.endpoint());
    let upstream = NamedUpstream::start("llm").await.unwrap();

    let start = SystemTime::now();
    let mut trace = tracer.begin(Some(CLIENT.as_bytes()), Some(b"vendor=opaque"));
    assert!(trace.sampled);
    let attempt = trace.next_attempt();
    let attempt_start = SystemTime::now();
    let echo = harness::json_of(
        reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", upstream.url()))
            .header("traceparent", &attempt.traceparent)
            .body(CHAT_BODY),
    )
    .await;
    let attempt_end = SystemTime::now();
    let sent = echo["headers"]["traceparent"].as_str().unwrap();
    let seen = TraceContext::parse(sent.as_bytes()).unwrap();
    assert_eq!(seen.trace_id, client.trace_id, "upstream saw {sent}");
    assert_eq!(seen.span_id, attempt.span_id);
    assert!(seen.sampled);

    let attempts = [Attempt {
        span_id: attempt.span_id,
        start: attempt_start,
        end: attempt_end,
        address: Some(upstream.addr()),
        error: None,
    }];
    tracer.finish(
        &trace,
        &FinishedRequest {
            start,
            end: SystemTime::now(),
            method: "POST",
            path: "/v1/chat/completions",
            status: 200,
            route: "chat",
            cluster: "llm-stable",
            version: "v1",
            lineage_id: None,
            operation: "chat",
            request_model: "smol",
            response_model: Some("smol-135m"),
            input_tokens: Some(9),
            output_tokens: Some(21),
            finish_reason: Some("stop"),
            ttft: Some(Duration::from_millis(120)),
            prompt_fingerprint: Some("9f86d081884c7d65"),
            load_run: Some("load-00000000000000aa"),
            kvcache_ratio: None,
            error: None,
            grpc: None,
            attempts: &attempts,
        },
    );

    let (server, upstream_span) = collector.request_spans(&client.trace_id_hex()).await;

    assert_linked(&server, &upstream_span, &client, &seen);
    assert_eq!(server.id, trace.context.span_id_hex());
    assert_eq!(server.name, "POST chat");
    assert_eq!(server.trace_state, "vendor=opaque");
    assert_eq!(upstream_span.name, "chat smol");

    let both = [
        ("gen_ai.operation.name", "Str(chat)"),
        ("gen_ai.request.model", "Str(smol)"),
        ("gen_ai.response.model", "Str(smol-135m)"),
        ("gen_ai.usage.input_tokens", "Int(9)"),
        ("gen_ai.usage.output_tokens", "Int(21)"),
        ("gen_ai.response.finish_reasons", "Slice(Str(stop))"),
        ("gen_ai.response.time_to_first_chunk", "Double(0.12)"),
        ("sluice.prompt_fingerprint", "Str(9f86d081884c7d65)"),
        ("http.response.status_code", "Int(200)"),
    ];
    let server_only = [
        ("url.path", "Str(/v1/chat/completions)"),
        ("sluice.route", "Str(chat)"),
        ("sluice.cluster", "Str(llm-stable)"),
        ("sluice.version", "Str(v1)"),
        ("sluice.load_run", "Str(load-00000000000000aa)"),
    ];
    let port = format!("Int({})", upstream.addr().port());
    let upstream_only = [
        ("server.address", "Str(127.0.0.1)"),
        ("server.port", port.as_str()),
    ];
    for (span, attrs) in [
        (&server, &both[..]),
        (&upstream_span, &both[..]),
        (&server, &server_only[..]),
        (&upstream_span, &upstream_only[..]),
    ] {
        for (key, want) in attrs {
            assert_eq!(span.attr(key), *want, "{} {key}", span.name);
        }
    }
    assert!(!collector.output().contains("secret prompt"));
    // The collector logs the spans before the exporter hears back that it took
    // them: the count follows a moment later.
    let deadline = Instant::now() + Duration::from_secs(10);
    while tracer.exported_spans() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(tracer.dropped_spans(), 0);
    assert_eq!(tracer.exported_spans(), 2);
}

/// The echo upstream behind sluice exporting every trace to `otlp_endpoint`; the chat
/// route's URL.
async fn traced(otlp_endpoint: &str) -> (NamedUpstream, Sluice, String) {
    let upstream = NamedUpstream::start("llm").await.unwrap();
    let sluice = harness::llm_config(upstream.addr())
        .section(
            "telemetry",
            format!(
                "{{ otlp_endpoint: \"{otlp_endpoint}\", sample_ratio: 1.0, service_name: sluice-e2e }}"
            ),
        )
        .start();
    let url = format!(
        "http://{}/v1/chat/completions",
        harness::listener(&sluice, "public")
    );
    (upstream, sluice, url)
}

/// [`CHAT_BODY`] posted to `url` in the client's trace ([`CLIENT`], with a `tracestate`);
/// the upstream's echo of it.
async fn chat_echo(url: &str) -> Value {
    let response = reqwest::Client::new()
        .post(url)
        .header("traceparent", CLIENT)
        .header("tracestate", "vendor=opaque")
        .header("content-type", "application/json")
        .body(CHAT_BODY)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

const CHAT_BODY: &str =
    r#"{"model":"smol","messages":[{"role":"user","content":"a secret prompt"}]}"#;

/// The real request path: a client's `traceparent` through sluice reaches the upstream
/// with the same trace id and sluice's client span as parent, and both spans arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]

async fn sluice_propagates_the_trace_and_exports_its_spans() {
    let Some(collector) = collector().await else {
        return;
    };
    let client = TraceContext::parse(CLIENT.as_bytes()).unwrap();
    let (upstream, _sluice, url) = traced(&collector.endpoint()).await;
    let echo = chat_echo(&url).await;
    let sent = echo["headers"]["traceparent"].as_str().unwrap();
    let seen = TraceContext::parse(sent.as_bytes()).unwrap();
    assert_eq!(seen.trace_id, client.trace_id, "upstream saw {sent}");
    assert_ne!(
        seen.span_id, client.span_id,
        "sluice must be the upstream's parent"
    );
    assert!(seen.sampled);
    assert_eq!(echo["headers"]["tracestate"], "vendor=opaque");

    let (server, upstream_span) = collector.request_spans(&client.trace_id_hex()).await;
    assert_linked(&server, &upstream_span, &client, &seen);
    assert_eq!(upstream_span.attr("gen_ai.request.model"), "Str(smol)");
    assert_eq!(
        upstream_span.attr("server.port"),
        format!("Int({})", upstream.addr().port())
    );
    assert_eq!(server.attr("http.response.status_code"), "Int(200)");
    assert!(!collector.output().contains("secret prompt"));
}

/// With the collector down, requests through sluice are served as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_serves_normally_with_the_collector_down() {
    let dead = format!("http://127.0.0.1:{}", free_port());
    let (_upstream, sluice, url) = traced(&dead).await;
    let began = Instant::now();
    for _ in 0..20 {
        let echo = chat_echo(&url).await;
        assert!(echo["headers"]["traceparent"].is_string());
    }
    // Twenty loopback requests; an export on the request path would take seconds.
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "{:?}",
        began.elapsed()
    );
    // The lost spans are counted where an operator sees them.
    let dropped = |text: &str| {
        harness::metric_value(text, "sluice_trace_spans_dropped_total", &[]).unwrap_or(0.0)
    };
    let text =
        harness::metrics_within(&sluice, Duration::from_secs(20), |t| dropped(t) > 0.0).await;
    assert!(dropped(&text) > 0.0, "no dropped spans counted");
}

/// A grpcio call through sluice in the client's trace: its server span carries the RPC
/// attributes, the status from the server's trailers (NOT_FOUND, 5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_calls_server_span_carries_the_rpc_attributes() {
    let Some(collector) = collector().await else {
        return;
    };
    let Some(python) = crate::grpc::python() else {
        return;
    };
    let (_server, upstream) = crate::grpc::grpc_server(&python, &[]).await;
    let sluice = harness::TestConfig::http()
        .cluster_with("grpc", "http", [&upstream], "version: v1, protocol: h2c")
        .route("rpc", "grpc: 100")
        .section(
            "telemetry",
            format!(
                "{{ otlp_endpoint: \"{}\", sample_ratio: 1.0, service_name: sluice-e2e }}",
                collector.endpoint()
            ),
        )
        .start();
    let listen = harness::listener(&sluice, "public").port();
    let client = TraceContext::parse(CLIENT.as_bytes()).unwrap();
    let got = crate::grpc::grpc_calls(
        &python,
        listen,
        serde_json::json!({"method": "/test.Svc/Missing", "n": 1,
                           "metadata": [["traceparent", CLIENT]]}),
    )
    .await;
    assert_eq!(got["codes"]["NOT_FOUND"], 1, "{got}");

    let (server, _) = collector.request_spans(&client.trace_id_hex()).await;
    assert_eq!(server.attr("rpc.system"), "Str(grpc)");
    assert_eq!(server.attr("rpc.service"), "Str(test.Svc)");
    assert_eq!(server.attr("rpc.method"), "Str(Missing)");
    assert_eq!(server.attr("rpc.grpc.status_code"), "Int(5)");
}
