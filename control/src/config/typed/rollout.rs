//! A validated rollout: defaults filled in, every value parsed, the route
//! and clusters checked against the rest of the config.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde::Serialize;
use sluice_filters::{Plan, Price};

#[derive(Clone, Debug, PartialEq)]
pub struct RolloutConfig {
    pub name: String,
    pub route: String,
    pub stable: String,
    pub canary: String,
    /// Canary weights in percent, strictly rising, the last one 100.
    pub steps: Vec<u32>,
    pub hold: Duration,
    pub min_requests: u64,
    pub interval: Duration,
    /// Whole seconds, 1..=60: the stats windows are one-second buckets.
    pub window: Duration,
    pub consecutive: u32,
    pub on_breach: OnBreach,
    /// What a rollout in progress does when sluice restarts with its state.
    pub on_restart: OnRestart,
    pub gates: Gates,
    /// Fleet mode: where the gates are read; `None` reads this instance's
    /// stats windows.
    pub source: Option<RolloutSource>,
    /// Fleet mode: control API base URLs, without a trailing `/`, every
    /// weight change is applied to; empty (and no `discovery`) changes
    /// this instance's store.
    pub targets: Vec<String>,
    /// Fleet mode: the targets are every address a DNS name resolves to
    /// (`targets: { dns: NAME:PORT }`), instead of `targets`.
    pub discovery: Option<DnsTargets>,
    /// Fleet mode: how often every target's split is read and set back
    /// to the rollout's weight where it differs.
    pub reconcile_interval: Duration,
    /// Fleet mode: how many targets are called at once, and how long each
    /// call may take.
    pub fanout: Fanout,
    /// Fleet mode: the environment variable holding the targets' token.
    pub target_token_env: String,
    /// The canary cluster's `cost:`, resolved at validation for the
    /// `cost_per_1k_max` gate; `None` without that gate, or when a fleet
    /// controller does not list the canary (its PromQL reads what the
    /// targets priced).
    pub canary_price: Option<Price>,
    /// `plan: auto`: the plan that set the steps, hold and gates, with the
    /// rule behind each part.
    pub plan: Option<Plan>,
    /// `p99_vs_stable` is judged only while the route (canary and stable)
    /// takes more than this many requests a second: a plan's busy-route
    /// rule, when the rate was not known as it was made.
    pub p99_vs_stable_above_rps: Option<f64>,
}

pub(crate) const DEFAULT_STEPS: [u32; 5] = [1, 5, 20, 50, 100];
pub(crate) const DEFAULT_HOLD: Duration = Duration::from_secs(30);
pub(crate) const DEFAULT_MIN_REQUESTS: u64 = 100;
pub(crate) const DEFAULT_INTERVAL: Duration = Duration::from_millis(250);
pub(crate) const DEFAULT_WINDOW: Duration = Duration::from_secs(10);
pub(crate) const DEFAULT_CONSECUTIVE: u32 = 2;
pub(crate) const DEFAULT_RECONCILE_INTERVAL: Duration = Duration::from_secs(5);
pub(crate) const DEFAULT_DNS_REFRESH: Duration = Duration::from_secs(10);
pub(crate) const DEFAULT_FANOUT: Fanout = Fanout {
    concurrency: 64,
    timeout: Duration::from_secs(2),
};
/// Prometheus's own default `scrape_interval`.
pub(crate) const DEFAULT_SCRAPE_INTERVAL: Duration = Duration::from_secs(15);
/// The variable `sluice ctl` reads the token from, too.
pub(crate) const DEFAULT_TARGET_TOKEN_ENV: &str = "SLUICE_ADMIN_TOKEN";

impl RolloutConfig {
    /// Fleet mode applies weights through the targets' control APIs.
    pub fn is_fleet(&self) -> bool {
        !self.targets.is_empty() || self.discovery.is_some()
    }
}

/// `targets: { dns: NAME:PORT, resolver: IP:PORT, refresh: 10s }`: a
/// headless Service's pods, found again every `refresh`.
#[derive(Clone, Debug, PartialEq)]
pub struct DnsTargets {
    /// The name whose A and AAAA records are the targets.
    pub name: String,
    /// Every target's control API port.
    pub port: u16,
    /// The DNS server asked; `None`: the system's (`/etc/resolv.conf`).
    pub resolver: Option<SocketAddr>,
    pub refresh: Duration,
}

impl DnsTargets {
    /// `NAME:PORT`, as written.
    pub fn label(&self) -> String {
        format!("{}:{}", self.name, self.port)
    }

    /// The control API base URL of the target at `ip`.
    pub fn url(&self, ip: IpAddr) -> String {
        format!("http://{}", SocketAddr::new(ip, self.port))
    }
}

/// How the controller calls its targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fanout {
    /// Calls in flight at once, at most.
    pub concurrency: usize,
    /// Bounds each call: connect, answer and body together.
    pub timeout: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnBreach {
    /// Canary weight to 0 in one swap.
    Rollback,
    /// Hold the weight where it is and wait for an operator.
    Pause,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnRestart {
    /// Go on from the saved state and step.
    #[default]
    Continue,
    /// Come back paused at the saved step, for an operator to resume.
    Pause,
}

use sluice_filters::GrpcCodes;
/// The gate names and units live in `sluice-filters`, shared with `sluice load`'s
/// `thresholds:`.
pub use sluice_filters::{Gate, GateUnit as Unit};

/// Bounds on the canary, each in its gate's unit (milliseconds for
/// durations); upper bounds but for [`Gate::is_lower_bound`]. At least one
/// is set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Gates {
    bounds: BTreeMap<Gate, f64>,
    /// Load traffic (`x-sluice-load` from a trusted peer) is left out of
    /// every gate; by default it counts like any other.
    pub exclude_load: bool,
    /// The gRPC codes `grpc_success_rate_min` counts as failures.
    pub grpc_failures: GrpcCodes,
}

impl Gates {
    /// Every gate that is set, with its bound, in [`Gate::ALL`] order.
    pub fn bounds(&self) -> Vec<(Gate, f64)> {
        self.bounds.iter().map(|(&g, &b)| (g, b)).collect()
    }

    /// These gates with load traffic left out (`exclude_load: true`).
    pub fn excluding_load(mut self) -> Gates {
        self.exclude_load = true;
        self
    }
}

impl FromIterator<(Gate, f64)> for Gates {
    fn from_iter<I: IntoIterator<Item = (Gate, f64)>>(iter: I) -> Gates {
        Gates {
            bounds: iter.into_iter().collect(),
            exclude_load: false,
            grpc_failures: GrpcCodes::default(),
        }
    }
}

impl<const N: usize> From<[(Gate, f64); N]> for Gates {
    fn from(bounds: [(Gate, f64); N]) -> Gates {
        bounds.into_iter().collect()
    }
}

/// What `source.prometheus.queries` may replace: a gate's query, or the
/// request count that `min_requests` is judged on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QueryKey {
    Gate(Gate),
    Requests,
}

impl QueryKey {
    const REQUESTS: &'static str = "requests";

    pub fn as_str(self) -> &'static str {
        match self {
            QueryKey::Gate(g) => g.as_str(),
            QueryKey::Requests => QueryKey::REQUESTS,
        }
    }

    /// A gate's name (or alias), or `requests`; the error lists them all.
    pub fn parse(text: &str) -> Result<QueryKey, sluice_filters::UnknownName> {
        if text == QueryKey::REQUESTS {
            return Ok(QueryKey::Requests);
        }
        Gate::parse(text).map(QueryKey::Gate).map_err(|_| {
            let names = Gate::ALL.iter().map(|g| g.as_str());
            sluice_filters::UnknownName::new("query", text, names.chain([QueryKey::REQUESTS]))
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum RolloutSource {
    Prometheus {
        /// Base URL of the Prometheus HTTP API, without a trailing `/`.
        url: String,
        /// How often Prometheus scrapes the instances.
        scrape_interval: Duration,
        /// PromQL replacing generated queries.
        queries: BTreeMap<QueryKey, String>,
    },
}
