//! Pure per-request logic for sluice: no I/O, no clock reads, no spawning.
//! Callers pass bytes, instants (as plain numbers) and random numbers in.

mod arrival;
mod balance;
mod breaker;
mod compare;
mod cost;
mod coverage;
mod embedding;
mod failure;
mod fault;
mod feedback;
// The fuzz targets' invariants, public so that `fuzz/` can call them; not API.
#[doc(hidden)]
pub mod fuzzing;
mod gate;
mod genai;
mod grpc;
mod hash;
mod head_limits;
mod hop;
mod limit;
mod lineage;
mod load;
mod load_run;
mod matcher;
mod meter;
mod metrics;
mod mirror;
mod names;
mod path_error;
mod perturb;
mod plan;
mod record;
mod redact;
mod redis_url;
mod request_scan;
mod resp;
mod sampling;
mod shedding;
mod slope;
mod toxiproxy;
mod trace;
mod trace_context;
mod units;
mod weighted;

pub use arrival::{Arrival, WeibullComponent};
pub use balance::{EndpointSet, OutlierPolicy, DEFAULT_OUTLIER_POLICY};
pub use breaker::{
    Breaker, BreakerLimits, BreakerSlot, Breakers, RetryBudget, DEFAULT_RETRY_BUDGET,
};
pub use compare::{
    answer_text, compare, differences, fingerprint, ids_at, recall_at_k, similarity, Comparison,
    Leg, NoiseFloor,
};
pub use cost::{
    cost_per_1k, CostMeter, CostMetrics, ModelPrice, Price, RawPrice, Usage, COST_METRIC,
    COST_TOKENS_METRIC,
};
pub use coverage::{
    coverage_sampled, user_text, Coverage, CoverageReading, PromptClusters,
    DEFAULT_COVERAGE_SIMILARITY, DEFAULT_MAX_CLUSTERS,
};
pub use embedding::{
    cosine, dispersion, quantile, similarity_kl, Dispersion, DriftReading, DriftWindow,
    RecentValues, SavedBaseline, BASELINE_VERSION, KL_BINS,
};
pub use failure::{error_body, Failure};
pub use fault::{
    header_faults, sampled, ActionName, Direction, Distribution, Experiment, FaultAction,
    FaultClock, FaultKind, FaultMatch, FaultMetrics, FaultTarget, GrpcAbort, HaltIf, HeaderFault,
    Pacer, Skip, Step, Toxic, TruncateMode, CORRUPT_EVENT, CORRUPT_GRPC_MESSAGE, HEADER_ABORT,
    HEADER_ABORT_GRPC, HEADER_DELAY, HEADER_TOKEN_DELAY,
};
pub use fault::{RequestAction, StreamAction};
pub use feedback::{
    cause_of, initial_weight, is_error_status, weight_at, Cause, FeedbackLineage, HalfLives,
    Manifest as FeedbackManifest, Trigger as FeedbackTrigger, TriggerKind,
    Window as FeedbackWindow, FEEDBACK_VERSION, MANIFEST_FILE as FEEDBACK_MANIFEST,
    MAX_WEIGHT as MAX_FEEDBACK_WEIGHT, TRACE_FILE as FEEDBACK_TRACE,
};
pub use gate::{Gate, GateUnit};
pub use genai::{
    GenAiHandles, GenAiMetrics, ModelHandleCache, Operation, GAP_METRIC, TOKEN_USAGE_METRIC,
    TPOT_METRIC, TTFT_METRIC,
};
pub use grpc::{
    grpc_message, grpc_method, grpc_status_http, is_grpc, parse_grpc_timeout, GrpcCodes,
    GrpcCutter, GrpcFramer, GRPC_MAX_STATUS,
};
pub use hash::{hash_bytes, mix64};
pub use head_limits::{HeadLimits, HeadScan, HeadVerdict};
pub use hop::HOP_BY_HOP;
pub use limit::{
    estimate_input_tokens, format_reset, limit_key, limited_body, peer_ms, retry_after_secs,
    store_down_body, Bucket, Cost, Decision, Descriptor, FleetAsks, FleetBucket, FleetKey,
    KeyState, Lease, LeaseAsk, LeaseGrant, LimitKind, LimitMetrics, LimitRouteMetrics,
    LimitStoreMetrics, Limits, RateHeaders, Settled, FLEET_KINDS, STREAM_RETRY_MS, WINDOW_MS,
};
pub use lineage::{
    canonical_json, content_id, Artifact, ArtifactKind, ContentId, ModelLineage, VersionedUri,
};
pub use load::{
    classify as classify_load, run_id as load_run_id, Cidr, LoadMark, Source, Stripped,
    KVCACHE_RATIO_HEADER, LOAD_HEADER, MAX_RUN_ID, SERVED_CLUSTER_HEADER, SERVED_LINEAGE_HEADER,
    SERVED_VERSION_HEADER,
};
pub use load_run::{LoadRun, LoadRunState, LoadRunThreshold};
pub use matcher::{HeaderMatch, Matcher, ModelGlob, RequestParts, RequestView};
pub use meter::{
    Dialect, EventKind, Framer, Framing, MeterSummary, StreamEvent, TokenMeter, MAX_EVENT,
};
pub use metrics::{
    register_family, register_gauge, register_histogram, LabelledFamily, LoadStrippedMetrics,
    Metrics, RespHandles, RespMetrics, RolloutMetrics, RouteClusterMetrics, StatusClass,
    GRPC_REQUESTS_METRIC, REQUESTS_METRIC, REQUEST_DURATION_METRIC, STATUS_CLASS_LABEL,
};
pub use mirror::{
    MirrorMetrics, MirrorResult, MirrorRouteMetrics, MirrorSampler, StabilityMetrics,
    ANSWER_DISPERSION_METRIC, ANSWER_PAIRWISE_METRIC, EMBEDDING_KL_METRIC,
    EMBEDDING_SIMILARITY_METRIC,
};
pub use names::{join as join_names, UnknownName};
pub use path_error::{PathError, PathErrors};
pub use perturb::{PerturbMode, PerturbSpec, Perturbation, DEFAULT_MASK_TOKEN, PERTURBED_HEADER};
pub use plan::{
    default_bound, plan, Change, Check, ClassRule, Plan, PlanInput, PlanRules, Reason, Semver,
    Side, Spread,
};
pub use record::{RequestRecord, TokenOutcome, UpstreamTiming};
pub use redact::{is_secret_header, RedactError, RedactionConfig, RedactionKind, Redactor, Secret};
pub use redis_url::{check_redis_target, expand_env, redis_connect_url};
pub use request_scan::{scan_request, with_model, RequestInfo};
pub use resp::{
    ClientReply, Command as RespCommand, Exchange as RespExchange, Fallback as RespFallback,
    Reply as RespReply, ReplyParser as RespReplyParser, Request as RespRequest,
    RequestParser as RespRequestParser, RespError, RespSession,
};
pub use sampling::SessionSampler;
#[doc(hidden)]
pub use serde as __serde;
pub use shedding::{
    is_shed, judge as judge_shedding, priority_rank, shed_body, shed_share, Evidence, LevelChange,
    ShedPolicy, Shedder, SheddingMetrics, SheddingRouteMetrics, Signal, Signals,
    Verdict as ShedVerdict, MAX_HOLD_FACTOR,
};
pub use slope::{
    calm_baseline, median, p99_token_slope, slope_interval, slope_readable, theil_sen,
    token_cost_excess, SlopeAt, TokenBin, TokenSlope, DEFAULT_EXCESS_BOUND_MS, SLOPE_MIN_REQUESTS,
};
pub use toxiproxy::{FieldError, ProxyPatch, ProxySpec, ToxicSpec, TOXIC_TYPES};
pub use trace::{
    format_rfc3339, hash_ids, json_error, parse_line, parse_lines, parse_wall_clock, Bodies, Body,
    LineError, PromptShape, ThinkTimes, TraceInput, TraceLine, HASH_BLOCK_BYTES, TRACE_VERSION,
};
pub use trace_context::{sample, TraceContext};
pub use units::{format_duration, parse_duration, parse_percent, parse_size};
pub use weighted::{StickyTable, WeightedTable};
