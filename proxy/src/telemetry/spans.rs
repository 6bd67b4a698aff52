//! Turns a finished request into OTLP span data: the server span and one client span
//! per upstream attempt, with HTTP, RPC (gRPC calls) and GenAI semantic-convention
//! attributes.
//!
//! Spans are built as `SpanData` with explicit ids instead of through the SDK's
//! tracer, whose span builder (0.33) ignores a given span id: the client spans must
//! carry exactly the ids that were sent upstream in `traceparent`.

use std::borrow::Cow;
use std::str::FromStr;

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};

use super::{FinishedRequest, GrpcCall, RequestTrace};

// Attribute names: OpenTelemetry semantic conventions (HTTP, server, error, GenAI),
// then sluice's own. The GenAI names left the Rust semconv crate for the GenAI
// conventions repository, so they are spelled out here.
pub(super) const HTTP_REQUEST_METHOD: &str = "http.request.method";
pub(super) const HTTP_RESPONSE_STATUS_CODE: &str = "http.response.status_code";
pub(super) const URL_PATH: &str = "url.path";
pub(super) const SERVER_ADDRESS: &str = "server.address";
pub(super) const SERVER_PORT: &str = "server.port";
pub(super) const ERROR_TYPE: &str = "error.type";
pub(super) const RPC_SYSTEM: &str = "rpc.system";
pub(super) const RPC_SERVICE: &str = "rpc.service";
pub(super) const RPC_METHOD: &str = "rpc.method";
pub(super) const RPC_GRPC_STATUS_CODE: &str = "rpc.grpc.status_code";
pub(super) const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
pub(super) const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
pub(super) const GEN_AI_RESPONSE_MODEL: &str = "gen_ai.response.model";
pub(super) const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
pub(super) const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
pub(super) const GEN_AI_RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
/// Seconds from the request to the first chunk of a streamed response.
pub(super) const GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: &str = "gen_ai.response.time_to_first_chunk";
pub(super) const SLUICE_ROUTE: &str = "sluice.route";
pub(super) const SLUICE_CLUSTER: &str = "sluice.cluster";
pub(super) const SLUICE_VERSION: &str = "sluice.version";
/// The lineage id of the cluster version that served the request.
pub(super) const SLUICE_CLUSTER_LINEAGE_ID: &str = "sluice.cluster.lineage_id";
pub(super) const SLUICE_PROMPT_FINGERPRINT: &str = "sluice.prompt_fingerprint";
/// The `sluice load` run of load traffic (`x-sluice-load` from a trusted peer).
pub(super) const SLUICE_LOAD_RUN: &str = "sluice.load_run";
/// The serving endpoint's KV-cache usage (0..1) as the upstream scrape last read it.
pub(super) const SLUICE_KVCACHE_RATIO: &str = "sluice.kvcache_ratio";
/// 1-based number of the attempt within its request.
pub(super) const SLUICE_ATTEMPT: &str = "sluice.attempt";

/// The server span first, then the client spans in attempt order.
pub(super) fn build(
    trace: &RequestTrace,
    request: &FinishedRequest<'_>,
    scope: &InstrumentationScope,
) -> Vec<SpanData> {
    let trace_id = TraceId::from_bytes(trace.context.trace_id);
    let server_id = SpanId::from_bytes(trace.context.span_id);
    let trace_state = trace
        .tracestate
        .as_deref()
        .and_then(|s| TraceState::from_str(s).ok())
        .unwrap_or_default();
    let context = |span_id| {
        SpanContext::new(
            trace_id,
            span_id,
            TraceFlags::SAMPLED,
            false,
            trace_state.clone(),
        )
    };
    let mut spans = Vec::with_capacity(1 + request.attempts.len());

    let mut attributes = Vec::with_capacity(20);
    push_str(&mut attributes, HTTP_REQUEST_METHOD, request.method);
    push_str(&mut attributes, URL_PATH, path_only(request.path));
    if request.status != 0 {
        attributes.push(KeyValue::new(
            HTTP_RESPONSE_STATUS_CODE,
            i64::from(request.status),
        ));
    }
    push_str(&mut attributes, SLUICE_ROUTE, request.route);
    push_str(&mut attributes, SLUICE_CLUSTER, request.cluster);
    push_str(&mut attributes, SLUICE_VERSION, request.version);
    if let Some(id) = request.lineage_id {
        push_str(&mut attributes, SLUICE_CLUSTER_LINEAGE_ID, id);
    }
    if let Some(run) = request.load_run {
        push_str(&mut attributes, SLUICE_LOAD_RUN, run);
    }
    if let Some(ratio) = request.kvcache_ratio {
        attributes.push(KeyValue::new(SLUICE_KVCACHE_RATIO, ratio));
    }
    if let Some(call) = &request.grpc {
        push_grpc(&mut attributes, call);
    }
    push_request_genai(&mut attributes, request);
    push_response_genai(&mut attributes, request);
    match request.error {
        Some(error) => push_str(&mut attributes, ERROR_TYPE, error),
        None if request.status >= 500 => {
            attributes.push(KeyValue::new(ERROR_TYPE, request.status.to_string()));
        }
        None => {}
    }
    // A server span is an error only for a 5xx (or no response at all); a 4xx is the
    // client's problem (HTTP semantic conventions).
    let status = if request.status >= 500 || request.status == 0 {
        Status::error(request.error.unwrap_or("server error").to_owned())
    } else {
        Status::Unset
    };
    spans.push(SpanData {
        span_context: context(server_id),
        parent_span_id: trace
            .parent_span_id
            .map_or(SpanId::INVALID, SpanId::from_bytes),
        parent_span_is_remote: trace.parent_span_id.is_some(),
        span_kind: SpanKind::Server,
        name: server_name(request),
        start_time: request.start,
        end_time: request.end.max(request.start),
        attributes,
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status,
        instrumentation_scope: scope.clone(),
    });

    let last = request.attempts.len().saturating_sub(1);
    for (index, attempt) in request.attempts.iter().enumerate() {
        let mut attributes = Vec::with_capacity(16);
        push_str(&mut attributes, HTTP_REQUEST_METHOD, request.method);
        if let Some(address) = attempt.address {
            attributes.push(KeyValue::new(SERVER_ADDRESS, address.ip().to_string()));
            attributes.push(KeyValue::new(SERVER_PORT, i64::from(address.port())));
        }
        push_str(&mut attributes, SLUICE_CLUSTER, request.cluster);
        push_str(&mut attributes, SLUICE_VERSION, request.version);
        if let Some(id) = request.lineage_id {
            push_str(&mut attributes, SLUICE_CLUSTER_LINEAGE_ID, id);
        }
        attributes.push(KeyValue::new(SLUICE_ATTEMPT, index as i64 + 1));
        push_request_genai(&mut attributes, request);
        let status = if let Some(error) = &attempt.error {
            push_str(&mut attributes, ERROR_TYPE, error);
            Status::error(error.clone())
        } else if index == last {
            // The attempt that answered: the response is its outcome.
            if request.status != 0 {
                attributes.push(KeyValue::new(
                    HTTP_RESPONSE_STATUS_CODE,
                    i64::from(request.status),
                ));
            }
            push_response_genai(&mut attributes, request);
            if request.status >= 400 {
                // For a client span every 4xx/5xx is an error; its type is the code.
                let code = request.status.to_string();
                attributes.push(KeyValue::new(ERROR_TYPE, code.clone()));
                Status::error(code)
            } else {
                Status::Unset
            }
        } else {
            Status::Unset
        };
        spans.push(SpanData {
            span_context: context(SpanId::from_bytes(attempt.span_id)),
            parent_span_id: server_id,
            parent_span_is_remote: false,
            span_kind: SpanKind::Client,
            name: client_name(request),
            start_time: attempt.start,
            end_time: attempt.end.max(attempt.start),
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status,
            instrumentation_scope: scope.clone(),
        });
    }
    spans
}

/// `{method} {route}` (the route is sluice's name for it), or `sluice.request`.
fn server_name(request: &FinishedRequest<'_>) -> Cow<'static, str> {
    if request.route.is_empty() || request.method.is_empty() {
        Cow::Borrowed("sluice.request")
    } else {
        Cow::Owned(format!("{} {}", request.method, request.route))
    }
}

/// `{gen_ai.operation.name} {gen_ai.request.model}` (GenAI conventions); a request
/// that is not a GenAI operation gets the HTTP client name, its method.
fn client_name(request: &FinishedRequest<'_>) -> Cow<'static, str> {
    match (request.operation, request.request_model) {
        ("", _) if request.method.is_empty() => Cow::Borrowed("sluice.upstream"),
        ("", _) => Cow::Owned(request.method.to_owned()),
        (op, "") => Cow::Owned(op.to_owned()),
        (op, model) => Cow::Owned(format!("{op} {model}")),
    }
}

/// `rpc.system`, `rpc.service`, `rpc.method` and `rpc.grpc.status_code` of a gRPC call.
pub(super) fn push_grpc(attributes: &mut Vec<KeyValue>, call: &GrpcCall<'_>) {
    push_str(attributes, RPC_SYSTEM, "grpc");
    push_str(attributes, RPC_SERVICE, call.service);
    push_str(attributes, RPC_METHOD, call.method);
    if let Some(code) = call.status {
        attributes.push(KeyValue::new(RPC_GRPC_STATUS_CODE, i64::from(code)));
    }
}

fn push_request_genai(attributes: &mut Vec<KeyValue>, request: &FinishedRequest<'_>) {
    push_str(attributes, GEN_AI_OPERATION_NAME, request.operation);
    push_str(attributes, GEN_AI_REQUEST_MODEL, request.request_model);
    if let Some(fingerprint) = request.prompt_fingerprint {
        push_str(attributes, SLUICE_PROMPT_FINGERPRINT, fingerprint);
    }
}

fn push_response_genai(attributes: &mut Vec<KeyValue>, request: &FinishedRequest<'_>) {
    if let Some(model) = request.response_model {
        push_str(attributes, GEN_AI_RESPONSE_MODEL, model);
    }
    if let Some(tokens) = request.input_tokens {
        attributes.push(KeyValue::new(
            GEN_AI_USAGE_INPUT_TOKENS,
            saturating_i64(tokens),
        ));
    }
    if let Some(tokens) = request.output_tokens {
        attributes.push(KeyValue::new(
            GEN_AI_USAGE_OUTPUT_TOKENS,
            saturating_i64(tokens),
        ));
    }
    if let Some(reason) = request.finish_reason.filter(|r| !r.is_empty()) {
        attributes.push(KeyValue::new(
            GEN_AI_RESPONSE_FINISH_REASONS,
            Value::Array(Array::String(vec![StringValue::from(reason.to_owned())])),
        ));
    }
    if let Some(ttft) = request.ttft {
        attributes.push(KeyValue::new(
            GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
            ttft.as_secs_f64(),
        ));
    }
}

fn push_str(attributes: &mut Vec<KeyValue>, key: &'static str, value: &str) {
    if !value.is_empty() {
        attributes.push(KeyValue::new(key, value.to_owned()));
    }
}

fn path_only(path: &str) -> &str {
    path.split_once('?').map_or(path, |(p, _)| p)
}

fn saturating_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
