//! The config: raw serde structs (`raw`) and the validation that turns one
//! into a typed [`Config`] or a list of every error. Units (`250ms`, `5%`)
//! are parsed by `sluice_filters`, the same parser the workload half uses.

mod raw;
mod typed;
mod validate;

pub use raw::{
    RawBound, RawClassRule, RawCompare, RawConfig, RawCoverage, RawDnsTargets, RawEmbeddings,
    RawFanout, RawFeedback, RawGates, RawHalfLife, RawLoad, RawMirror, RawOnBreach, RawOnRestart,
    RawPercent, RawPerturb, RawPlanMode, RawPlans, RawPrometheusSource, RawRecorder, RawRewrite,
    RawRollout, RawRolloutSource, RawShedBounds, RawShedding, RawSheddingPriority, RawSize,
    RawTargets,
};
pub(crate) use raw::{RawFault, RawRoute};
pub use sluice_filters::{format_duration, parse_duration, parse_percent, parse_size};
pub use typed::{
    AccessLogConfig, AccessLogTarget, AdminConfig, AdminTls, BaselineFile, ClusterConfig,
    ClusterKind, CompareConfig, Config, CoverageConfig, DnsTargets, EmbeddingsConfig, Endpoint,
    Fanout, FeedbackConfig, Gate, Gates, GpuConfig, GpuMode, LimitStore, LimitsConfig,
    ListenerConfig, ListenerLimits, ListenerProtocol, LoadConfig, MirrorConfig, OnBreach,
    OnRestart, OnUnavailable, QueryKey, RecorderConfig, RolloutConfig, RolloutSource, RouteConfig,
    RuntimeConfig, Scope, SheddingConfig, SidePriority, StickyConfig, TelemetryConfig, Timeouts,
    TokenSource, Unit, UpstreamProtocol, UpstreamTls, DEFAULT_KEY_PREFIX, DEFAULT_MAX_TOKENS,
    DEFAULT_ROUTE_MAX_BODY, DEFAULT_SYNC_INTERVAL,
};
pub(crate) use validate::DEFAULT_ADMIN_MAX_BODY;
pub use validate::RUNTIME_LISTENER_PREFIX;

use std::fmt;

/// One problem with a config: where, and what is wrong there.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Every problem found in a config, in the order they were found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    /// The errors of one item (`prefix`, e.g. `rollouts[3]`) as paths
    /// relative to it (`rollouts[3].gates.ttft_p95` → `gates.ttft_p95`), as
    /// the body that added the item was written.
    pub fn relative_to(self, prefix: &str) -> ConfigErrors {
        let inside = format!("{prefix}.");
        ConfigErrors(
            self.0
                .into_iter()
                .map(|mut e| {
                    if e.path == prefix {
                        e.path = String::new();
                    } else if let Some(rest) = e.path.strip_prefix(&inside) {
                        e.path = rest.to_string();
                    }
                    e
                })
                .collect(),
        )
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl Config {
    /// Parses YAML (or JSON, which is YAML) and validates it.
    pub fn from_yaml(text: &str) -> Result<Config, ConfigErrors> {
        RawConfig::from_yaml(text)?.validate()
    }
}

#[cfg(test)]
mod tests;
