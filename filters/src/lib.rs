//! Pure per-request logic for sluice: no I/O, no clock reads, no spawning.
//! Callers pass bytes, instants (as plain numbers) and random numbers in.

mod balance;
mod compare;
mod failure;
mod fault;
mod genai;
mod hash;
mod hop;
mod matcher;
mod meter;
mod metrics;
mod mirror;
mod record;
mod request_scan;
mod resp;
mod trace_context;
mod units;
mod weighted;

pub use balance::EndpointSet;
pub use compare::{
    answer_text, compare, differences, fingerprint, ids_at, recall_at_k, similarity, Comparison,
    Leg, NoiseFloor,
};
pub use failure::{error_body, Failure};
pub use fault::{
    header_faults, sampled, Direction, Distribution, EventKind, Experiment, FaultAction,
    FaultClock, FaultKind, FaultMatch, FaultMetrics, FaultTarget, HaltIf, HeaderFault, Pacer, Skip,
    Step, Toxic, TruncateMode, CORRUPT_EVENT, HEADER_ABORT, HEADER_DELAY, HEADER_TOKEN_DELAY,
};
pub use genai::{GenAiHandles, GenAiMetrics, ModelHandleCache, Operation};
pub use hash::{hash_bytes, mix64};
pub use hop::HOP_BY_HOP;
pub use matcher::{HeaderMatch, Matcher, RequestParts, RequestView};
pub use meter::{Dialect, MeterSummary, TokenMeter};
pub use metrics::{
    Metrics, RespHandles, RespMetrics, RolloutMetrics, RouteClusterMetrics, StatusClass,
};
pub use mirror::{MirrorMetrics, MirrorResult, MirrorRouteMetrics, MirrorSampler};
pub use record::{RequestRecord, TokenOutcome, UpstreamTiming};
pub use request_scan::{scan_request, RequestInfo};
pub use resp::{
    ClientReply, Command as RespCommand, Exchange as RespExchange, Fallback as RespFallback,
    Reply as RespReply, ReplyParser as RespReplyParser, Request as RespRequest,
    RequestParser as RespRequestParser, RespError, RespSession,
};
pub use trace_context::{sample, TraceContext};
pub use units::{format_duration, parse_duration, parse_percent, parse_size};
pub use weighted::{StickyTable, WeightedTable};
