//! `rollouts:` as written: one progressive release of a canary cluster on a
//! route, with its steps, timing and SLA gates. Values stay as written
//! (durations and percents as strings) so that validation reports every
//! problem with its path; `POST /v1/rollouts` reads the same shape.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::super::{ConfigError, ConfigErrors};

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawRollout {
    pub name: String,
    pub route: String,
    pub stable: String,
    pub canary: String,
    /// Canary weights in percent, rising, the last one 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<u32>>,
    /// How long each step runs with every gate passing before the next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<String>,
    /// Canary requests in the window before any gate is judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_requests: Option<u64>,
    /// How often the gates are evaluated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// How far back the gates look (at most 60s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// Evaluations in a row with a breach before acting on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_breach: Option<RawOnBreach>,
    #[serde(default)]
    pub gates: RawGates,
    /// Fleet mode: read the gates from Prometheus instead of local stats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<RawRolloutSource>,
    /// Fleet mode: control API base URLs every weight change is applied to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// Fleet mode: the environment variable holding the targets' bearer
    /// token (default `SLUICE_ADMIN_TOKEN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_token_env: Option<String>,
}

impl RawRollout {
    /// One rollout as `POST /v1/rollouts` takes it, YAML or JSON; paths in
    /// errors are relative to it.
    pub fn from_yaml(text: &str) -> Result<RawRollout, ConfigErrors> {
        if text.trim().is_empty() {
            return Err(ConfigErrors(vec![ConfigError::new(
                "",
                "a rollout is required (YAML or JSON, the shape of one `rollouts:` item)",
            )]));
        }
        super::parse_yaml(text)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RawOnBreach {
    Rollback,
    Pause,
}

/// Every gate is an upper bound on one measure of the canary.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawGates {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p95: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p99: Option<String>,
    /// Gap between content chunks (vLLM's "ITL"); `itl_p99` is read as this.
    #[serde(default, alias = "itl_p99", skip_serializing_if = "Option::is_none")]
    pub gap_p99: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_p95: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p99: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_rate: Option<RawPercent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_vs_stable: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_vs_stable: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_max: Option<RawPercent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_queue_max: Option<u64>,
}

impl RawGates {
    pub fn is_empty(&self) -> bool {
        *self == RawGates::default()
    }
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawRolloutSource {
    pub prometheus: RawPrometheusSource,
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawPrometheusSource {
    pub url: String,
    /// How often Prometheus scrapes the fleet (default 15s): bounds the
    /// window from below and sets the default interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrape_interval: Option<String>,
    /// PromQL per gate (or `requests`), replacing the generated query.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub queries: BTreeMap<String, String>,
}

/// A percent as written: `1%` (a string in YAML) or a bare number.
#[derive(Clone, Debug, PartialEq)]
pub enum RawPercent {
    Number(f64),
    Text(String),
}

impl Serialize for RawPercent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RawPercent::Number(n) => s.serialize_f64(*n),
            RawPercent::Text(t) => s.serialize_str(t),
        }
    }
}

impl<'de> Deserialize<'de> for RawPercent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct PercentVisitor;

        impl Visitor<'_> for PercentVisitor {
            type Value = RawPercent;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a percent like 1% or a number from 0 to 100")
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawPercent, E> {
                Ok(RawPercent::Number(v as f64))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawPercent, E> {
                Ok(RawPercent::Number(v as f64))
            }

            fn visit_f64<E: de::Error>(self, v: f64) -> Result<RawPercent, E> {
                Ok(RawPercent::Number(v))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawPercent, E> {
                Ok(RawPercent::Text(v.to_string()))
            }
        }

        d.deserialize_any(PercentVisitor)
    }
}
