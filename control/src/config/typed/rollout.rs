//! A validated rollout: defaults filled in, every value parsed, the route
//! and clusters checked against the rest of the config.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

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
    pub gates: Gates,
    /// Fleet mode: where the gates are read; `None` reads this instance's
    /// stats windows.
    pub source: Option<RolloutSource>,
    /// Fleet mode: control API base URLs, without a trailing `/`, every
    /// weight change is applied to; empty changes this instance's store.
    pub targets: Vec<String>,
    /// Fleet mode: the environment variable holding the targets' token.
    pub target_token_env: String,
}

pub const DEFAULT_STEPS: [u32; 5] = [1, 5, 20, 50, 100];
pub const DEFAULT_HOLD: Duration = Duration::from_secs(30);
pub const DEFAULT_MIN_REQUESTS: u64 = 100;
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(250);
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(10);
pub const DEFAULT_CONSECUTIVE: u32 = 2;
/// Prometheus's own default `scrape_interval`.
pub const DEFAULT_SCRAPE_INTERVAL: Duration = Duration::from_secs(15);
/// The variable `sluice ctl` reads the token from, too.
pub const DEFAULT_TARGET_TOKEN_ENV: &str = "SLUICE_ADMIN_TOKEN";

impl RolloutConfig {
    /// Fleet mode applies weights through the targets' control APIs.
    pub fn is_fleet(&self) -> bool {
        !self.targets.is_empty()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnBreach {
    /// Canary weight to 0 in one swap.
    Rollback,
    /// Hold the weight where it is and wait for an operator.
    Pause,
}

/// Upper bounds on the canary. Every field is optional; at least one is set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Gates {
    pub ttft_p95: Option<Duration>,
    pub ttft_p99: Option<Duration>,
    pub gap_p99: Option<Duration>,
    pub tpot_p95: Option<Duration>,
    pub latency_p99: Option<Duration>,
    /// Percent of requests answered 5xx, 0..=100.
    pub error_rate: Option<f64>,
    /// Canary latency p99 over stable latency p99.
    pub p99_vs_stable: Option<f64>,
    /// Canary TTFT p95 over stable TTFT p95.
    pub ttft_vs_stable: Option<f64>,
    /// Percent of GPU memory used, on the fullest device.
    pub gpu_memory_max: Option<f64>,
    /// Requests waiting in the canary model server's queue.
    pub upstream_queue_max: Option<u64>,
}

/// The name of one gate, as written in `gates:` and shown by the API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Gate {
    TtftP95,
    TtftP99,
    GapP99,
    TpotP95,
    LatencyP99,
    ErrorRate,
    P99VsStable,
    TtftVsStable,
    GpuMemoryMax,
    UpstreamQueueMax,
}

impl Gate {
    pub const ALL: [Gate; 10] = [
        Gate::TtftP95,
        Gate::TtftP99,
        Gate::GapP99,
        Gate::TpotP95,
        Gate::LatencyP99,
        Gate::ErrorRate,
        Gate::P99VsStable,
        Gate::TtftVsStable,
        Gate::GpuMemoryMax,
        Gate::UpstreamQueueMax,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Gate::TtftP95 => "ttft_p95",
            Gate::TtftP99 => "ttft_p99",
            Gate::GapP99 => "gap_p99",
            Gate::TpotP95 => "tpot_p95",
            Gate::LatencyP99 => "latency_p99",
            Gate::ErrorRate => "error_rate",
            Gate::P99VsStable => "p99_vs_stable",
            Gate::TtftVsStable => "ttft_vs_stable",
            Gate::GpuMemoryMax => "gpu_memory_max",
            Gate::UpstreamQueueMax => "upstream_queue_max",
        }
    }

    /// The unit its value and bound are given in.
    pub fn unit(self) -> &'static str {
        match self {
            Gate::TtftP95 | Gate::TtftP99 | Gate::GapP99 | Gate::TpotP95 | Gate::LatencyP99 => "ms",
            Gate::ErrorRate | Gate::GpuMemoryMax => "%",
            Gate::P99VsStable | Gate::TtftVsStable => "ratio",
            Gate::UpstreamQueueMax => "requests",
        }
    }

    /// Relative gates compare the canary with stable in the same window.
    pub fn is_relative(self) -> bool {
        matches!(self, Gate::P99VsStable | Gate::TtftVsStable)
    }
}

impl Gates {
    /// Every gate that is set, with its bound in the gate's unit
    /// (milliseconds for durations), in [`Gate::ALL`] order.
    pub fn bounds(&self) -> Vec<(Gate, f64)> {
        let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1000.0);
        Gate::ALL
            .iter()
            .filter_map(|&g| {
                let bound = match g {
                    Gate::TtftP95 => ms(self.ttft_p95),
                    Gate::TtftP99 => ms(self.ttft_p99),
                    Gate::GapP99 => ms(self.gap_p99),
                    Gate::TpotP95 => ms(self.tpot_p95),
                    Gate::LatencyP99 => ms(self.latency_p99),
                    Gate::ErrorRate => self.error_rate,
                    Gate::P99VsStable => self.p99_vs_stable,
                    Gate::TtftVsStable => self.ttft_vs_stable,
                    Gate::GpuMemoryMax => self.gpu_memory_max,
                    Gate::UpstreamQueueMax => self.upstream_queue_max.map(|q| q as f64),
                }?;
                Some((g, bound))
            })
            .collect()
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum RolloutSource {
    Prometheus {
        /// Base URL of the Prometheus HTTP API, without a trailing `/`.
        url: String,
        /// How often Prometheus scrapes the instances.
        scrape_interval: Duration,
        /// PromQL by gate name (or `requests`), replacing generated queries.
        queries: BTreeMap<String, String>,
    },
}
