//! The config as written: serde structs that reject unknown keys. Values
//! that need checking (addresses, durations, names) stay strings here so
//! that `validate` can report every problem at once, each with its path.

mod fault;
mod feedback;
mod keyed;
mod mirror;
mod plan;
mod recorder;
mod rollout;
mod shedding;

use super::typed::SidePriority;

pub(crate) use fault::{
    RawAbort, RawActionBody, RawDelay, RawDirection, RawDistribution, RawEmpty, RawFault,
    RawFaultAction, RawFaultMatch, RawTruncateMode,
};
pub use feedback::{RawFeedback, RawHalfLife};
pub use mirror::{
    RawCompare, RawCoverage, RawEmbeddings, RawMirror, RawPerturb, RawRewrite, RawSize,
};
pub use plan::{RawClassRule, RawPlanMode, RawPlans};
pub(crate) use recorder::RawBodies;
pub use recorder::RawRecorder;
pub use rollout::{
    RawBound, RawDnsTargets, RawFanout, RawGates, RawOnBreach, RawOnRestart, RawPercent,
    RawPrometheusSource, RawRollout, RawRolloutSource, RawTargets,
};
pub use shedding::{RawPriority as RawSheddingPriority, RawShedBounds, RawShedding};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::{ConfigError, ConfigErrors};

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub runtime: Option<RawRuntime>,
    pub admin: Option<RawAdmin>,
    #[serde(default)]
    pub listeners: Vec<RawListener>,
    #[serde(default)]
    pub clusters: Vec<RawCluster>,
    #[serde(default)]
    pub routes: Vec<RawRoute>,
    /// Progressive releases; also added at run time by `POST /v1/rollouts`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rollouts: Vec<RawRollout>,
    /// Fault experiments; also added at run time by `POST /v1/faults`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<RawFault>,
    pub telemetry: Option<RawTelemetry>,
    pub gpu: Option<RawGpu>,
    /// Traffic recording; also started at run time by `PUT /v1/recorder`.
    pub recorder: Option<RawRecorder>,
    /// Load traffic: whose `x-sluice-load` mark is believed.
    pub load: Option<RawLoad>,
    /// Overrides of the rules `plan: auto` and `sluice plan` size rollouts by.
    pub plans: Option<RawPlans>,
    /// Where a breach's recorded traffic is saved as a load scenario.
    pub feedback: Option<RawFeedback>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawLoad {
    /// Address ranges (`10.0.0.0/8`) whose `x-sluice-load` header labels the
    /// request as load traffic (default loopback); others have it stripped.
    pub trusted_peers: Option<Vec<String>>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawTelemetry {
    /// OTLP/gRPC collector, e.g. `http://127.0.0.1:4317`. No export when unset.
    pub otlp_endpoint: Option<String>,
    /// Share of traces kept, 0.0..=1.0 (default 1.0). A sampled `traceparent` from the client is always kept.
    pub sample_ratio: Option<f64>,
    pub service_name: Option<String>,
    /// Request header that names the model when the body does not.
    pub model_header: Option<String>,
    pub access_log: Option<RawAccessLog>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAccessLog {
    /// `stdout` or a file path (appended to).
    pub path: String,
    /// Percent of requests logged, 0..=100 (default 100).
    pub percent: Option<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RawGpuMode {
    Auto,
    On,
    Off,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawGpu {
    pub enabled: Option<RawGpuMode>,
    pub interval: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawRuntime {
    pub threads: Option<usize>,
    pub grace_period: Option<String>,
    /// The longest `ttl` a fault experiment may have (default 1h).
    pub max_fault_ttl: Option<String>,
    /// CPU priority of the shadow sender's threads (default `idle`).
    pub mirror_priority: Option<SidePriority>,
    /// The most fault experiments at once (default 1000).
    pub max_experiments: Option<usize>,
    /// Where the run-time state (API weights, rollouts, experiments) is
    /// kept across restarts; none kept when unset.
    pub state_dir: Option<String>,
    /// The Unix socket `sluice run --upgrade` takes the listeners over
    /// (default `/tmp/sluice_upgrade.sock`).
    pub upgrade_sock: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    pub listen: Option<String>,
    /// One token, named `default` with scope `admin`, from this variable.
    pub token_env: Option<String>,
    /// A file of one bare token (`default`, `admin`) or of lines
    /// `name scope token`; re-read when it changes.
    pub token_file: Option<String>,
    /// Named tokens, each with a scope and its secret in a variable or a file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tokens: Vec<RawAdminToken>,
    /// TLS on the admin listener, with an optional client CA (mTLS).
    pub tls: Option<RawAdminTls>,
    /// Where the audit log is appended as JSON lines.
    pub audit_file: Option<String>,
    /// The largest request body the API parses (default 16MiB).
    pub max_body: Option<RawSize>,
    /// The deepest nesting of objects and lists in a body (default 64).
    pub max_body_depth: Option<usize>,
    /// Serve Toxiproxy's REST API here (loopback only: it has no auth).
    pub toxiproxy: Option<String>,
    /// The TTL each toxic added through Toxiproxy's API gets (default 1h).
    pub toxiproxy_default_ttl: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdminToken {
    pub name: String,
    /// `read`, `write` or `admin`.
    pub scope: String,
    pub env: Option<String>,
    pub file: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdminTls {
    pub cert: String,
    pub key: String,
    /// Clients must present a certificate this CA signed.
    pub client_ca: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RawProtocol {
    Http,
    Https,
    Tcp,
}

#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawListener {
    pub name: String,
    pub listen: String,
    pub protocol: RawProtocol,
    /// `https`: PEM certificate chain file.
    pub cert: Option<String>,
    /// `https`: PEM private key file.
    pub key: Option<String>,
    /// `http`: accept HTTP/2 with prior knowledge beside HTTP/1.1 (default true).
    pub h2c: Option<bool>,
    /// `tcp`: the cluster every connection goes to.
    pub cluster: Option<String>,
    /// `http`/`https`: limits on client connections and request heads.
    pub limits: Option<RawListenerLimits>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawListenerLimits {
    pub max_header_bytes: Option<RawSize>,
    pub max_uri_bytes: Option<RawSize>,
    pub header_timeout: Option<String>,
    pub idle_timeout: Option<String>,
    pub max_connections: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RawClusterKind {
    Llm,
    Vector,
    Cache,
    Http,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RawUpstreamProtocol {
    Http1,
    H2c,
    H2,
    Auto,
}

#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawCluster {
    pub name: String,
    pub kind: RawClusterKind,
    pub version: Option<String>,
    pub endpoints: Vec<String>,
    pub tls: Option<RawUpstreamTls>,
    /// How sluice speaks to the endpoints: `http1` (default), `h2c`, `h2`, `auto`.
    pub protocol: Option<RawUpstreamProtocol>,
    pub timeouts: Option<RawTimeouts>,
    /// `llm`: the model server's own Prometheus path (e.g. `/metrics`), scraped into `sluice_upstream_*`.
    pub metrics_path: Option<String>,
    pub metrics_interval: Option<String>,
    /// What the cluster's tokens cost: `{gpu_hour: 2.5, gpus: 1}` or
    /// `{models: {NAME: {input_per_1k, output_per_1k}}}`, the table
    /// `sluice capacity` reads too.
    pub cost: Option<sluice_filters::RawPrice>,
    /// Eject an endpoint that answered 5xx too many times in a row.
    pub outlier_detection: Option<RawOutlierDetection>,
    /// Requests in flight, waiting for a connection, and upstream
    /// connections open, at most (1024 each).
    pub circuit_breakers: Option<RawCircuitBreakers>,
    /// Retries in flight, at most a share of the requests in flight.
    pub retry_budget: Option<RawRetryBudget>,
    /// Where the cluster's model came from, for `sluice lineage` and plans.
    pub lineage: Option<RawLineage>,
}

/// `lineage: {dataset: uri@version, checkpoint: uri@sha, prompt_template:
/// uri@sha, api_version: 3.2.1}`, each optional.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawLineage {
    pub dataset: Option<String>,
    pub checkpoint: Option<String>,
    pub prompt_template: Option<String>,
    pub api_version: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawRetryBudget {
    pub percent: Option<RawPercent>,
    pub min_concurrent: Option<u64>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawCircuitBreakers {
    pub max_requests: Option<u64>,
    pub max_pending: Option<u64>,
    pub max_connections: Option<u64>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawOutlierDetection {
    pub consecutive_5xx: Option<u32>,
    pub interval: Option<String>,
    pub base_ejection: Option<String>,
    pub max_ejection_time: Option<String>,
    /// The largest share of the cluster out at once (one endpoint may always be).
    pub max_ejection: Option<RawPercent>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpstreamTls {
    /// Server name sent and verified; defaults to the endpoint's host.
    pub sni: Option<String>,
    /// Verify the upstream's certificate (default true).
    pub verify: Option<bool>,
    /// PEM file of extra CA certificates to trust.
    pub ca: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawTimeouts {
    pub connect: Option<String>,
    pub first_byte: Option<String>,
    pub idle: Option<String>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawRoute {
    pub name: String,
    pub listener: String,
    #[serde(rename = "match")]
    pub matcher: Option<RawMatch>,
    pub split: BTreeMap<String, u32>,
    pub sticky: Option<RawSticky>,
    /// Let a request pick stable or canary with `x-sluice-version` (testers).
    pub allow_version_header: Option<bool>,
    /// Let a request ask for faults with `x-sluice-fault-*` headers (default false).
    pub allow_header_faults: Option<bool>,
    /// Shadow traffic: copies of this route's requests to another cluster.
    pub mirror: Option<RawMirror>,
    /// Per split target (cluster name): what to change in requests sent there.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rewrite: BTreeMap<String, RawTargetRewrite>,
    /// Token-aware rate limits, per descriptor key.
    pub limits: Option<RawLimits>,
    /// The largest request body the route takes (default 32MiB); 413 beyond.
    pub max_body: Option<RawSize>,
    /// Adaptive shedding of the lowest priorities under load.
    pub shedding: Option<RawShedding>,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    /// What a budget is keyed by: `route`, `model`, `header:NAME`, combined.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub descriptor: Vec<String>,
    pub requests_per_minute: Option<u64>,
    pub input_tokens_per_minute: Option<u64>,
    pub output_tokens_per_minute: Option<u64>,
    pub total_tokens_per_minute: Option<u64>,
    pub concurrent_streams: Option<u64>,
    /// Output tokens reserved for a request that sets no `max_tokens`.
    pub default_max_tokens: Option<u64>,
    /// Where a fleet of sluices shares the budgets (none: each keeps its own).
    pub store: Option<RawLimitStore>,
}

/// `limits.store`: one kind of store, named by its key.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimitStore {
    pub redis: Option<RawRedisStore>,
}

/// `limits.store.redis`.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawRedisStore {
    /// `HOST:PORT` or `redis://[[USER]:PASSWORD@]HOST:PORT[/DB]`, `${VAR}`s read at connect.
    pub url: String,
    pub sync_interval: Option<String>,
    pub on_unavailable: Option<RawOnUnavailable>,
    pub key_prefix: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RawOnUnavailable {
    Open,
    Closed,
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawTargetRewrite {
    /// Put in the JSON body's `model` field of requests sent to this target.
    pub model: String,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawMatch {
    pub path_prefix: Option<String>,
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// A glob on the request's model (`gpt-*`), read from the body or
    /// `telemetry.model_header`.
    pub model: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawSticky {
    pub header: String,
}

impl RawConfig {
    /// Parses YAML (JSON is YAML too). A syntax or shape error comes back
    /// with the path where it was found; an empty document is an empty config.
    pub fn from_yaml(text: &str) -> Result<RawConfig, ConfigErrors> {
        if text.trim().is_empty() {
            return Ok(RawConfig::default());
        }
        parse_yaml(text)
    }

    /// The route named `name`, as written.
    pub fn route(&self, name: &str) -> Option<&RawRoute> {
        self.routes.iter().find(|r| r.name == name)
    }

    pub fn to_yaml(&self) -> String {
        serde_norway::to_string(self).unwrap_or_default()
    }
}

/// One item as an API call adds it (`what`, in the shape of `shape`), YAML
/// or JSON; paths in errors are relative to it.
pub(crate) fn parse_item<T: serde::de::DeserializeOwned>(
    text: &str,
    what: &str,
    shape: &str,
) -> Result<T, ConfigErrors> {
    if text.trim().is_empty() {
        return Err(ConfigErrors(vec![ConfigError::new(
            "",
            format!("{what} is required (YAML or JSON, the shape of {shape})"),
        )]));
    }
    parse_yaml(text)
}

/// Reads any part of the config (the whole of it, or one rollout) from YAML
/// or JSON, with the path of the first problem.
pub(crate) fn parse_yaml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, ConfigErrors> {
    let de = serde_norway::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let message = without_location(&inner.to_string(), &path);
        ConfigErrors(vec![ConfigError::new(path, message)])
    })
}

/// serde_norway appends " at line L column C" and may prefix the path of the
/// enclosing value; keep the location (it helps), drop the repeated path.
fn without_location(message: &str, path: &str) -> String {
    match message.split_once(": ") {
        Some((head, rest)) if path.starts_with(head) => rest.to_string(),
        _ => message.to_string(),
    }
}
