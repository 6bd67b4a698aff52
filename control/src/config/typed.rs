//! The validated config: every value parsed, every reference checked.

mod admin;
mod feedback;
mod mirror;
mod recorder;
mod rollout;
mod shedding;

pub use admin::{AdminConfig, AdminTls, Scope, TokenSource};
pub use feedback::FeedbackConfig;
pub(crate) use feedback::DEFAULT_BEFORE;
pub use mirror::{BaselineFile, CompareConfig, CoverageConfig, EmbeddingsConfig, MirrorConfig};
pub(crate) use mirror::{DEFAULT_MAX_BODY, DEFAULT_MAX_IN_FLIGHT, DEFAULT_MIRROR_TIMEOUT};
pub use recorder::RecorderConfig;
pub(crate) use recorder::{DEFAULT_MAX_BYTES, DEFAULT_ROTATE_BYTES};
pub use rollout::{
    DnsTargets, Fanout, Gate, Gates, OnBreach, OnRestart, QueryKey, RolloutConfig, RolloutSource,
    Unit,
};
pub(crate) use rollout::{
    DEFAULT_CONSECUTIVE, DEFAULT_DNS_REFRESH, DEFAULT_FANOUT, DEFAULT_HOLD, DEFAULT_INTERVAL,
    DEFAULT_MIN_REQUESTS, DEFAULT_RECONCILE_INTERVAL, DEFAULT_SCRAPE_INTERVAL, DEFAULT_STEPS,
    DEFAULT_TARGET_TOKEN_ENV, DEFAULT_WINDOW,
};
pub use shedding::SheddingConfig;
pub(crate) use shedding::{
    DEFAULT_PRIORITY_HEADER, DEFAULT_RECOVERY_PERCENT, DEFAULT_RESTORE_STEPS, DEFAULT_RETRY_AFTER,
    DEFAULT_SHED_HOLD, DEFAULT_SHED_INTERVAL, DEFAULT_SHED_MIN_REQUESTS, DEFAULT_SHED_WINDOW,
    MAX_RESTORE_STEPS,
};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use sluice_filters::{
    BreakerLimits, Cidr, Descriptor, Experiment, Limits, Matcher, ModelLineage, OutlierPolicy,
    PlanRules, Price, RetryBudget,
};

use super::RawConfig;

#[derive(Clone, Debug)]
pub struct Config {
    /// What was written, kept so that the API can show it and change it.
    pub raw: RawConfig,
    pub runtime: RuntimeConfig,
    pub admin: AdminConfig,
    pub listeners: Vec<ListenerConfig>,
    pub clusters: Vec<ClusterConfig>,
    pub routes: Vec<RouteConfig>,
    pub rollouts: Vec<RolloutConfig>,
    /// Fault experiments, as the data plane decides on them.
    pub faults: Vec<Experiment>,
    pub telemetry: TelemetryConfig,
    pub gpu: GpuConfig,
    /// The recording the config asks for, if any.
    pub recorder: Option<RecorderConfig>,
    pub load: LoadConfig,
    /// The rules `plan: auto` sized its rollouts by (`plans:` over the
    /// built-in ones); `sluice plan` reads them too.
    pub plans: PlanRules,
    /// Where breaches are saved as load scenarios, if anywhere.
    pub feedback: Option<FeedbackConfig>,
}

/// `load:`: which peers may label their requests as load traffic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadConfig {
    /// The `x-sluice-load` header is believed only from these ranges, and
    /// stripped before forwarding from any other peer.
    pub trusted_peers: Vec<Cidr>,
}

impl Default for LoadConfig {
    fn default() -> Self {
        Self {
            trusted_peers: vec![Cidr::LOOPBACK_V4, Cidr::LOOPBACK_V6],
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct TelemetryConfig {
    pub otlp_endpoint: Option<String>,
    pub sample_ratio: f64,
    pub service_name: String,
    /// Lower-case header naming the model when the request body does not.
    pub model_header: Option<String>,
    pub access_log: Option<AccessLogConfig>,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            otlp_endpoint: None,
            sample_ratio: 1.0,
            service_name: "sluice".into(),
            model_header: None,
            access_log: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccessLogTarget {
    Stdout,
    File(PathBuf),
}

#[derive(Clone, Debug, PartialEq)]
pub struct AccessLogConfig {
    pub target: AccessLogTarget,
    /// Share of requests logged, 0.0..=1.0.
    pub ratio: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuMode {
    /// Watch GPUs when a driver is found; say so once otherwise.
    Auto,
    /// Watch GPUs; a missing driver is logged as a warning.
    On,
    Off,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuConfig {
    pub mode: GpuMode,
    pub interval: Duration,
}

impl Default for GpuConfig {
    fn default() -> Self {
        Self {
            mode: GpuMode::Auto,
            interval: Duration::from_secs(5),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Worker threads per listener service.
    pub threads: usize,
    /// How long SIGTERM waits for in-flight requests before stopping.
    pub grace_period: Duration,
    /// The longest `ttl` a fault experiment may have.
    pub max_fault_ttl: Duration,
    pub mirror_priority: SidePriority,
    /// The most fault experiments at once.
    pub max_experiments: usize,
    /// Where the run-time state is kept across restarts (`state.json`).
    pub state_dir: Option<PathBuf>,
    /// The Unix socket a new `sluice run --upgrade` listens on for the
    /// running one's listening sockets.
    pub upgrade_sock: PathBuf,
}

/// How a side thread (the shadow sender's, the recorder's writer) competes
/// with the data plane for CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SidePriority {
    /// Linux `SCHED_IDLE`: the side work runs on CPU time the data plane
    /// leaves, and a waking proxy thread preempts it at once. On a saturated
    /// machine it waits, and its queue overflows (counted), and the primary
    /// does not notice.
    #[default]
    Idle,
    /// The same priority as the data plane: the side work keeps up under
    /// load, and costs the primary CPU when it is short of it.
    Normal,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenerProtocol {
    /// HTTP/1.1, plus HTTP/2 with prior knowledge when `h2c`.
    Http { h2c: bool },
    /// TLS with HTTP/2 or HTTP/1.1 chosen by ALPN.
    Https { cert: PathBuf, key: PathBuf },
    /// L4 pass-through to one cluster.
    Tcp { cluster: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerConfig {
    pub name: String,
    pub listen: SocketAddr,
    pub protocol: ListenerProtocol,
    pub limits: ListenerLimits,
}

/// `listeners[].limits`, with Envoy-like defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenerLimits {
    pub head: sluice_filters::HeadLimits,
    /// From accept (or, on a kept-alive connection, from the first byte of
    /// the next request) to the end of the request head.
    pub header_timeout: Duration,
    /// How long a kept-alive connection may wait for its next request.
    pub idle_timeout: Duration,
    /// Open client connections; past it new ones are accepted and closed.
    pub max_connections: usize,
}

impl Default for ListenerLimits {
    fn default() -> Self {
        Self {
            head: sluice_filters::HeadLimits::default(),
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1 << 16,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterKind {
    Llm,
    Vector,
    Cache,
    Http,
}

impl ClusterKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterKind::Llm => "llm",
            ClusterKind::Vector => "vector",
            ClusterKind::Cache => "cache",
            ClusterKind::Http => "http",
        }
    }
}

/// How sluice speaks HTTP to a cluster's endpoints (`clusters[].protocol`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UpstreamProtocol {
    /// HTTP/1.1 only, plain or TLS.
    #[default]
    Http1,
    /// HTTP/2 over plain TCP with prior knowledge (gRPC's usual upstream).
    H2c,
    /// HTTP/2 over TLS, ALPN `h2` only.
    H2,
    /// TLS: ALPN offers `h2` and `http/1.1`, the server picks. Plain: HTTP/1.1.
    Auto,
}

impl UpstreamProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamProtocol::Http1 => "http1",
            UpstreamProtocol::H2c => "h2c",
            UpstreamProtocol::H2 => "h2",
            UpstreamProtocol::Auto => "auto",
        }
    }

    /// Whether a request to this cluster may go over HTTP/2 (`tls`: the
    /// cluster has TLS, for `auto`). gRPC needs it.
    pub fn allows_h2(self, tls: bool) -> bool {
        match self {
            UpstreamProtocol::Http1 => false,
            UpstreamProtocol::H2c | UpstreamProtocol::H2 => true,
            UpstreamProtocol::Auto => tls,
        }
    }
}

/// An upstream address: `host` is kept for SNI and the Host header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub addr: SocketAddr,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamTls {
    pub sni: Option<String>,
    pub verify: bool,
    pub ca: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: Duration,
    /// Bounds every read from the upstream, the wait for the first byte
    /// (prefill) included.
    pub first_byte: Duration,
    /// How long an unused pooled upstream connection is kept.
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(2),
            first_byte: Duration::from_secs(120),
            idle: Duration::from_secs(60),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ClusterConfig {
    pub name: String,
    pub kind: ClusterKind,
    /// `version` label; empty when not set.
    pub version: String,
    pub endpoints: Vec<Endpoint>,
    pub tls: Option<UpstreamTls>,
    pub protocol: UpstreamProtocol,
    pub timeouts: Timeouts,
    /// The model server's own Prometheus path, scraped every `metrics_interval`.
    pub metrics_path: Option<String>,
    pub metrics_interval: Duration,
    /// The price table: `sluice_cost_usd_total` and the `cost_per_1k_max`
    /// gate read it.
    pub cost: Option<Price>,
    /// `outlier_detection`: off unless set, Envoy's defaults for what is not.
    pub outlier_detection: Option<OutlierPolicy>,
    /// `circuit_breakers`, Envoy's 1024 each unless set.
    pub circuit_breakers: BreakerLimits,
    /// `retry_budget`, Envoy's 20% and 3 unless set.
    pub retry_budget: RetryBudget,
    /// `lineage`: where the model came from; empty when not set.
    pub lineage: ModelLineage,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StickyConfig {
    /// Lower-case header name whose value identifies a session.
    pub header: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RouteConfig {
    pub name: String,
    pub listener: String,
    pub matcher: Matcher,
    /// (cluster name, weight), in name order.
    pub split: Vec<(String, u32)>,
    pub sticky: Option<StickyConfig>,
    /// Whether `x-sluice-version: stable|canary` may pick the cluster of
    /// this route's rollout (for testers).
    pub allow_version_header: bool,
    /// Whether `x-sluice-fault-*` request headers may inject faults.
    pub allow_header_faults: bool,
    pub mirror: Option<MirrorConfig>,
    /// `rewrite.<cluster>.model`: the model put in requests sent to that target.
    pub rewrite_model: BTreeMap<String, String>,
    pub limits: Option<LimitsConfig>,
    /// The largest request body in bytes: a longer one is answered 413.
    pub max_body: u64,
    pub shedding: Option<SheddingConfig>,
}

/// `routes[].max_body` when unset: far above a chat request's body (a
/// 128k-token prompt is about 0.5 MiB; a few images in base64, some MiB),
/// while bounding what the mirror and the recorder may be handed.
pub const DEFAULT_ROUTE_MAX_BODY: u64 = 32 << 20;

/// A route's `limits:` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitsConfig {
    /// What a budget is keyed by (default: the route).
    pub descriptor: Vec<Descriptor>,
    pub limits: Limits,
    /// Output tokens reserved when a request sets no `max_tokens`.
    pub default_max_tokens: u64,
    /// `store.redis`: budgets shared by a fleet of sluices.
    pub store: Option<LimitStore>,
}

/// `limits.store.redis`: where a fleet of sluices keeps its shared budgets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitStore {
    /// As written: `${VAR}`s are read from the environment at connect time.
    pub url: String,
    /// How often this sluice settles its leases with the store.
    pub sync_interval: Duration,
    pub on_unavailable: OnUnavailable,
    /// Put before every key the store holds.
    pub key_prefix: String,
}

/// What a fleet-wide route decides while its store cannot be reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnUnavailable {
    /// Each sluice enforces the whole budget on its own.
    Open,
    /// Every request of the route is refused (503).
    Closed,
}

pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_millis(100);
pub const DEFAULT_KEY_PREFIX: &str = "sluice:ratelimit:";

impl LimitsConfig {
    /// The descriptor's form, for the `descriptor` label: `header:x-tenant,model`.
    pub fn descriptor_label(&self) -> String {
        let forms: Vec<String> = self.descriptor.iter().map(Descriptor::form).collect();
        forms.join(",")
    }
}

/// Output tokens reserved for a request that sets no `max_tokens`.
pub const DEFAULT_MAX_TOKENS: u64 = 1_024;

impl Config {
    pub fn cluster(&self, name: &str) -> Option<&ClusterConfig> {
        self.clusters.iter().find(|c| c.name == name)
    }

    pub fn route(&self, name: &str) -> Option<&RouteConfig> {
        self.routes.iter().find(|r| r.name == name)
    }

    pub fn rollout(&self, name: &str) -> Option<&RolloutConfig> {
        self.rollouts.iter().find(|r| r.name == name)
    }
}
