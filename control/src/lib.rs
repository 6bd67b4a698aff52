//! The sluice control plane: config, the live snapshot store, the control
//! API, the stats the API and the rollouts read, and the rollout
//! controllers, all started and stopped together by [`ControlPlane::start`].
//! Never imports the proxy or pingora: what it needs of the data plane is
//! the [`DataPlane`] trait.

mod api;
mod audit_file;
mod config;
mod connections;
mod events;
mod fault;
mod feedback;
// The config fuzz target's invariants, public so that `fuzz/` can call them; not API.
#[doc(hidden)]
pub mod fuzzing;
mod gpu;
mod graceful;
mod http_client;
mod lifecycle;
mod limits;
mod lineage;
mod mirror;
mod observers;
mod plane;
mod recorder;
mod reload;
mod reloads;
mod rollout;
mod runtimes;
mod shared;
mod shedding;
mod side_thread;
mod snapshot;
mod state;
mod stats;
mod store;
#[cfg(test)]
mod testing;
mod toxiproxy;
mod upstream_metrics;

pub use api::{
    AdminApi, ApiEndpoint, Auth, LoadRuns, PeerAddr, Readiness, AUTH_FAILURES_METRIC,
    AUTH_REFUSALS_METRIC, MAX_BODY_BYTES, MAX_LOAD_RUNS, TOKEN_RELOAD_ERRORS_METRIC,
};
pub use audit_file::AUDIT_ERRORS_METRIC;
pub use config::{
    format_duration, parse_duration, parse_percent, parse_size, AccessLogConfig, AccessLogTarget,
    AdminConfig, AdminTls, BaselineFile, ClusterConfig, ClusterKind, CompareConfig, Config,
    ConfigError, ConfigErrors, CoverageConfig, DnsTargets, EmbeddingsConfig, Endpoint, Fanout,
    FeedbackConfig, Gate, Gates, GpuConfig, GpuMode, LimitStore, LimitsConfig, ListenerConfig,
    ListenerLimits, ListenerProtocol, LoadConfig, MirrorConfig, OnBreach, OnRestart, OnUnavailable,
    QueryKey, RawBound, RawClassRule, RawCompare, RawConfig, RawCoverage, RawDnsTargets,
    RawEmbeddings, RawFanout, RawFeedback, RawGates, RawHalfLife, RawLoad, RawMirror, RawOnBreach,
    RawOnRestart, RawPercent, RawPerturb, RawPlanMode, RawPlans, RawPrometheusSource, RawRecorder,
    RawRewrite, RawRollout, RawRolloutSource, RawShedBounds, RawShedding, RawSheddingPriority,
    RawSize, RawTargets, RecorderConfig, RolloutConfig, RolloutSource, RouteConfig, RuntimeConfig,
    Scope, SheddingConfig, SidePriority, StickyConfig, TelemetryConfig, Timeouts, TokenSource,
    Unit, UpstreamProtocol, UpstreamTls, DEFAULT_KEY_PREFIX, DEFAULT_MAX_TOKENS,
    DEFAULT_ROUTE_MAX_BODY, DEFAULT_SYNC_INTERVAL, RUNTIME_LISTENER_PREFIX,
};
pub use events::{Event, EventLog};
pub use fault::{new_fault_id, FaultGuard, FaultRuntime, FaultState};
pub use gpu::GpuWatcher;
pub use graceful::serve_until_cancelled;
pub use lifecycle::{DataPlane, HandOverError, Stop};
pub use limits::{Admission, RouteLimits, LIMIT_STORE_SCRIPT, MAX_KEYS};
pub use lineage::{
    cluster_artifacts, cluster_id, config_artifact, config_artifacts, event_artifact,
    rollout_artifact, rollout_in,
};
pub use mirror::{
    DiffLeg, DiffRecord, EmbeddingDrift, MirrorDiffs, MirrorRuntime, PromptCoverage, ShadowGate,
    ShadowReading, DIFF_CAPACITY,
};
pub use observers::Observers;
pub use plane::{ControlOptions, ControlPlane, ControlPlaneHandle, StartError};
pub use recorder::{
    Capture, CaptureIds, CaptureStatus, Captured, Recorder, Source as RecordingSource,
    BYTES_METRIC as RECORDER_BYTES_METRIC, DROPPED_METRIC as RECORDER_DROPPED_METRIC,
    LINES_METRIC as RECORDER_LINES_METRIC, MAX_BODY as RECORDER_MAX_BODY,
};
pub use reload::reload_from_file;
pub use rollout::{
    Command, DiscoveryStatus, EventLineage, Figure, Figures, GateReading, Observation, Policy,
    RolloutError, RolloutEvent, RolloutStatus, Rollouts, Signals, SourceStatus, State,
    TargetStatus, Transition,
};
pub use runtimes::Runtimes;
pub use shared::Shared;
pub use shedding::RouteShedding;
pub use side_thread::set_side_priority;
pub use snapshot::{ClusterRuntime, RouteRuntime, RouteTarget, Snapshot};
pub use stats::{
    GrpcOutcome, Measure, Sample, Stats, StatsKey, StatsRow, TokenSample, WindowView,
    MAX_TOKEN_POINTS, MAX_WINDOW_SECONDS, WINDOW_SECONDS,
};
pub use store::SnapshotStore;
pub use toxiproxy::TcpListeners;
pub use upstream_metrics::{KvCacheReadings, UpstreamLoad, UpstreamScraper};
