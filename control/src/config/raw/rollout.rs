//! `rollouts:` as written: one progressive release of a canary cluster on a
//! route, with its steps, timing and SLA gates. Values stay as written
//! (durations and percents as strings) so that validation reports every
//! problem with its path; `POST /v1/rollouts` reads the same shape.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_with::skip_serializing_none;

use super::super::typed::{Gate, Unit};
use super::super::ConfigErrors;
use super::keyed;

#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawRollout {
    pub name: String,
    pub route: String,
    pub stable: String,
    pub canary: String,
    /// `auto`: steps, hold and gates from the change between the two
    /// clusters' versions and lineage (see `plans:`).
    pub plan: Option<super::RawPlanMode>,
    /// Canary weights in percent, rising, the last one 100.
    pub steps: Option<Vec<u32>>,
    /// How long each step runs with every gate passing before the next.
    pub hold: Option<String>,
    /// Canary requests in the window before any gate is judged.
    pub min_requests: Option<u64>,
    /// How often the gates are evaluated.
    pub interval: Option<String>,
    /// How far back the gates look (at most 60s).
    pub window: Option<String>,
    /// Evaluations in a row with a breach before acting on it.
    pub consecutive: Option<u32>,
    pub on_breach: Option<RawOnBreach>,
    /// With `runtime.state_dir`: what a rollout in progress does when
    /// sluice restarts (default `continue`).
    pub on_restart: Option<RawOnRestart>,
    #[serde(default)]
    pub gates: RawGates,
    /// Fleet mode: read the gates from Prometheus instead of local stats.
    pub source: Option<RawRolloutSource>,
    /// Fleet mode: control API base URLs every weight change is applied
    /// to, or a DNS name whose addresses are those control APIs.
    #[serde(default, skip_serializing_if = "RawTargets::is_empty")]
    pub targets: RawTargets,
    /// Fleet mode: the environment variable holding the targets' bearer
    /// token (default `SLUICE_ADMIN_TOKEN`).
    pub target_token_env: Option<String>,
    /// Fleet mode: how often every target's split is checked (default 5s).
    pub reconcile_interval: Option<String>,
    /// Fleet mode: calls at once and the time each may take.
    pub fanout: Option<RawFanout>,
}

/// `targets:` as written: a list of URLs, or `{ dns: NAME:PORT, ... }`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum RawTargets {
    List(Vec<String>),
    Dns(RawDnsTargets),
}

impl Default for RawTargets {
    fn default() -> Self {
        RawTargets::List(Vec::new())
    }
}

impl RawTargets {
    /// No target: the rollout writes this instance's store.
    pub fn is_empty(&self) -> bool {
        matches!(self, RawTargets::List(list) if list.is_empty())
    }
}

// By hand rather than `untagged`: a list or a map is told apart by its
// shape, and an error inside either keeps its path (`targets.dns`,
// `targets[2]`) instead of "did not match any variant".
impl<'de> Deserialize<'de> for RawTargets {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TargetsVisitor;

        impl<'de> Visitor<'de> for TargetsVisitor {
            type Value = RawTargets;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of control API URLs or a map like { dns: NAME:PORT }")
            }

            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<RawTargets, A::Error> {
                let list = Vec::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                Ok(RawTargets::List(list))
            }

            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<RawTargets, A::Error> {
                let dns = RawDnsTargets::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(RawTargets::Dns(dns))
            }
        }

        d.deserialize_any(TargetsVisitor)
    }
}

/// `targets: { dns: NAME:PORT, resolver: IP:PORT, refresh: 10s, scheme: http }`.
#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawDnsTargets {
    /// A name (a headless Service) and the control API port of every
    /// address it resolves to.
    pub dns: String,
    /// The DNS server to ask (default: the system's, `/etc/resolv.conf`).
    pub resolver: Option<String>,
    /// How often the name is resolved again (default 10s).
    pub refresh: Option<String>,
    /// The targets' scheme; `http` only, as for listed targets.
    pub scheme: Option<String>,
}

/// `fanout: { concurrency: 64, timeout: 2s }`.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawFanout {
    /// Targets called at once, at most (default 64).
    pub concurrency: Option<u64>,
    /// Bounds each call to a target (default 2s).
    pub timeout: Option<String>,
}

impl RawRollout {
    /// One rollout as `POST /v1/rollouts` takes it, YAML or JSON; paths in
    /// errors are relative to it.
    pub fn from_yaml(text: &str) -> Result<RawRollout, ConfigErrors> {
        super::parse_item(text, "a rollout", "one `rollouts:` item")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RawOnBreach {
    Rollback,
    Pause,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RawOnRestart {
    Continue,
    Pause,
}

/// The bound of each gate set, as written: `gates: { ttft_p95: 800ms }`.
/// The names are [`Gate`]'s table; each value has its gate's unit. One
/// keys are not gates: `exclude_load`, `grpc_failure_codes`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RawGates {
    pub bounds: BTreeMap<Gate, RawBound>,
    /// Leave load traffic (`x-sluice-load` from a trusted peer) out of
    /// every gate (default false: it counts).
    pub exclude_load: Option<bool>,
    /// The gRPC status codes `grpc_success_rate_min` counts as failures.
    pub grpc_failure_codes: Option<Vec<u32>>,
}

/// The keys of `gates:` that are not gates.
const EXCLUDE_LOAD: &str = "exclude_load";
const GRPC_FAILURE_CODES: &str = "grpc_failure_codes";

/// One gate's bound as written, by the gate's [`Unit`].
#[derive(Clone, Debug, PartialEq)]
pub enum RawBound {
    /// `800ms`.
    Duration(String),
    Percent(RawPercent),
    Ratio(f64),
    Requests(u64),
    /// `0.012` or `$0.012`: read as a percent is, a number or text.
    Usd(RawPercent),
}

impl RawGates {
    /// No gate set (`exclude_load` and `grpc_failure_codes` aside).
    pub fn is_empty(&self) -> bool {
        self.bounds.is_empty()
    }
}

impl keyed::Keyed for RawBound {
    type Key = Gate;
    const EXPECTING: &'static str = "a map of gates to their bounds";

    fn key(text: &str) -> Result<Gate, sluice_filters::UnknownName> {
        Gate::parse(text)
    }

    fn read<'de, D: Deserializer<'de>>(gate: Gate, d: D) -> Result<RawBound, D::Error> {
        Ok(match gate.unit() {
            Unit::Ms => RawBound::Duration(String::deserialize(d)?),
            Unit::Percent => RawBound::Percent(RawPercent::deserialize(d)?),
            Unit::Ratio => RawBound::Ratio(f64::deserialize(d)?),
            Unit::Requests => RawBound::Requests(u64::deserialize(d)?),
            Unit::Usd => RawBound::Usd(RawPercent::deserialize(d)?),
        })
    }
}

impl<'de> Deserialize<'de> for RawGates {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(GatesVisitor)
    }
}

struct GatesVisitor;

impl<'de> Visitor<'de> for GatesVisitor {
    type Value = RawGates;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(<RawBound as keyed::Keyed>::EXPECTING)
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<RawGates, A::Error> {
        let mut gates = RawGates::default();
        while let Some(text) = map.next_key::<String>()? {
            if text == EXCLUDE_LOAD {
                gates.exclude_load = Some(map.next_value()?);
                continue;
            }
            if text == GRPC_FAILURE_CODES {
                gates.grpc_failure_codes = Some(map.next_value()?);
                continue;
            }
            let (gate, bound) = keyed::next_value::<A, RawBound>(&mut map, &text)?;
            // `gap_p99` and its alias `itl_p99` are one gate.
            if gates.bounds.insert(gate, bound).is_some() {
                return Err(de::Error::custom(format!("gate `{gate}` is set twice")));
            }
        }
        Ok(gates)
    }
}

impl Serialize for RawGates {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        for (gate, bound) in &self.bounds {
            map.serialize_entry(gate, bound)?;
        }
        if let Some(exclude) = self.exclude_load {
            map.serialize_entry(EXCLUDE_LOAD, &exclude)?;
        }
        if let Some(codes) = &self.grpc_failure_codes {
            map.serialize_entry(GRPC_FAILURE_CODES, codes)?;
        }
        map.end()
    }
}

impl Serialize for RawBound {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RawBound::Duration(text) => s.serialize_str(text),
            RawBound::Percent(p) => p.serialize(s),
            RawBound::Ratio(r) => s.serialize_f64(*r),
            RawBound::Requests(n) => s.serialize_u64(*n),
            RawBound::Usd(p) => p.serialize(s),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawRolloutSource {
    pub prometheus: RawPrometheusSource,
}

#[skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawPrometheusSource {
    pub url: String,
    /// How often Prometheus scrapes the fleet (default 15s): bounds the
    /// window from below and sets the default interval.
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
