//! Feedback scenarios: when a rollout breaches or a fault experiment halts
//! itself, the control plane saves the recorded traffic of that window as a
//! trace (`trace.jsonl`, the trace schema of `trace.rs`, one line per
//! request) and this manifest beside it (`manifest.json`, `"v": 1`), and
//! `sluice load --feedback` replays them, each weighted by how badly it
//! broke and how long ago. Both sides read this one definition.
//!
//! Pure: callers pass the times in (µs since the Unix epoch, durations).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::lineage::{Artifact, ArtifactKind, ContentId};
use crate::path_error::PathError;
use crate::trace::parse_wall_clock;
use crate::units::parse_duration;

/// The manifest version this crate writes and reads.
pub const FEEDBACK_VERSION: u32 = 1;
/// The manifest's file name in a scenario's directory.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The trace's file name in a scenario's directory.
pub const TRACE_FILE: &str = "trace.jsonl";
/// No scenario weighs more than this, however bad its window.
pub const MAX_WEIGHT: f64 = 5.0;

/// What made the control plane save the scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TriggerKind {
    /// A rollout rolled back, or paused, on a breached gate.
    RolloutBreach,
    /// A fault experiment's `halt_if` stopped it.
    FaultHalt,
}

impl TriggerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerKind::RolloutBreach => "rollout_breach",
            TriggerKind::FaultHalt => "fault_halt",
        }
    }
}

/// Why it broke, as far as the window tells; it picks the half-life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    UpstreamTimeout,
    CacheMiss,
    Other,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::UpstreamTimeout => "upstream_timeout",
            Cause::CacheMiss => "cache_miss",
            Cause::Other => "other",
        }
    }
}

/// Whether a recorded status counts as an error: a 5xx, or no answer (0,
/// or no status at all).
pub fn is_error_status(status: Option<u16>) -> bool {
    status.is_none_or(|s| s == 0 || s >= 500)
}

/// The cause of a breach: `cache_miss` when the cluster that broke is a
/// cache (its misses sent the load through), else `upstream_timeout` when
/// at least half of the window's errors are 504 (the proxy's answer to an
/// upstream timeout), else `other`. `statuses`: the window's requests.
pub fn cause_of(cache_cluster: bool, statuses: &[Option<u16>]) -> Cause {
    if cache_cluster {
        return Cause::CacheMiss;
    }
    let errors = statuses.iter().filter(|s| is_error_status(**s)).count();
    let timeouts = statuses.iter().filter(|s| **s == Some(504)).count();
    if errors > 0 && timeouts * 2 >= errors {
        Cause::UpstreamTimeout
    } else {
        Cause::Other
    }
}

/// `min(5, 1 + 10 × error_rate)`, the error rate a fraction (0.2 for 20%);
/// a rate outside [0, 1] (or not a number) is taken as its nearest bound.
pub fn initial_weight(error_rate: f64) -> f64 {
    let rate = if error_rate.is_nan() {
        0.0
    } else {
        error_rate.clamp(0.0, 1.0)
    };
    (1.0 + 10.0 * rate).min(MAX_WEIGHT)
}

/// `initial × 0.5^(age / half_life)`. A zero half-life (which the config
/// refuses) decays at once.
pub fn weight_at(initial: f64, age: Duration, half_life: Duration) -> f64 {
    if half_life.is_zero() {
        return 0.0;
    }
    initial * 0.5f64.powf(age.as_secs_f64() / half_life.as_secs_f64())
}

/// The half-life of each cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HalfLives {
    pub upstream_timeout: Duration,
    pub cache_miss: Duration,
    pub other: Duration,
}

impl Default for HalfLives {
    /// 72 h for upstream timeouts, 24 h for cache misses under load, 48 h
    /// otherwise.
    fn default() -> HalfLives {
        HalfLives {
            upstream_timeout: Duration::from_secs(72 * 3600),
            cache_miss: Duration::from_secs(24 * 3600),
            other: Duration::from_secs(48 * 3600),
        }
    }
}

impl HalfLives {
    pub fn of(&self, cause: Cause) -> Duration {
        match cause {
            Cause::UpstreamTimeout => self.upstream_timeout,
            Cause::CacheMiss => self.cache_miss,
            Cause::Other => self.other,
        }
    }
}

/// The trigger: which gate, at what value, against which bound.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trigger {
    pub kind: TriggerKind,
    pub cause: Cause,
    /// The breached gate (`error_rate`, `ttft_p95`, ...), or for a fault
    /// halt `halt_if.error_rate`.
    pub gate: String,
    /// In the gate's unit; `None` when there was nothing to read.
    pub value: Option<f64>,
    pub bound: f64,
    /// `ms`, `%`, `ratio`, `requests`, `usd`.
    pub unit: String,
    /// The rollout event's or the halt's reason, as the audit log has it.
    pub reason: String,
}

/// The lineage ids the scenario hangs below.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedbackLineage {
    /// The cluster version that broke (a rollout's canary).
    pub cluster: Option<ContentId>,
    pub rollout: Option<ContentId>,
    /// The rollout event of the breach.
    pub event: Option<ContentId>,
}

/// The window of traffic saved, wall clock, RFC 3339.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    pub from: String,
    pub to: String,
}

/// `manifest.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub v: u32,
    /// The lineage id of the scenario: `artifact.id`.
    pub id: ContentId,
    pub trigger: Trigger,
    pub route: String,
    /// The rollout's name (rollout breaches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<String>,
    /// The experiment's id (fault halts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
    /// The cluster that broke and its version.
    pub cluster: Option<String>,
    pub version: Option<String>,
    pub lineage: FeedbackLineage,
    pub window: Window,
    /// Requests in the trace.
    pub requests: u64,
    /// Of them, errors (5xx or no answer).
    pub errors: u64,
    /// The window's error rate, a fraction.
    pub error_rate: f64,
    /// `min(5, 1 + 10 × error_rate)`.
    pub initial_weight: f64,
    /// `72h`: the weight halves every this long.
    pub half_life: String,
    /// When it was saved, RFC 3339: the weight's age counts from here.
    pub created: String,
    /// The trace's file name, beside the manifest.
    pub trace: String,
    /// What the trace lacks and why (no recorder, a window longer than the
    /// recorder's memory).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The lineage record (kind `feedback`), for `sluice lineage`.
    pub artifact: Artifact,
}

impl Manifest {
    /// Reads a manifest strictly: unknown keys, a wrong type, another
    /// version, times that do not parse, a rate outside [0, 1] and a trace
    /// that is not a plain file name are errors named by where they are.
    pub fn parse(text: &str) -> Result<Manifest, PathError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let manifest: Manifest = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let message = inner.to_string();
            let message = match message.rfind(" at line ") {
                Some(at) => message[..at].to_owned(),
                None => message,
            };
            PathError {
                path: if path == "." { String::new() } else { path },
                message,
            }
        })?;
        manifest.check()?;
        Ok(manifest)
    }

    fn check(&self) -> Result<(), PathError> {
        let at = |path: &str, message: String| PathError {
            path: path.to_owned(),
            message,
        };
        if self.v != FEEDBACK_VERSION {
            return Err(at(
                "v",
                format!(
                    "unsupported feedback manifest version {} (this sluice reads {FEEDBACK_VERSION})",
                    self.v
                ),
            ));
        }
        if !(0.0..=1.0).contains(&self.error_rate) {
            return Err(at(
                "error_rate",
                format!("{} is not a fraction in [0, 1]", self.error_rate),
            ));
        }
        if !(self.initial_weight.is_finite() && self.initial_weight >= 0.0) {
            return Err(at(
                "initial_weight",
                format!("{} is not a weight (>= 0)", self.initial_weight),
            ));
        }
        match parse_duration(&self.half_life) {
            Ok(d) if !d.is_zero() => {}
            Ok(_) => return Err(at("half_life", "must be greater than 0".into())),
            Err(e) => return Err(at("half_life", e)),
        }
        for (path, text) in [
            ("created", &self.created),
            ("window.from", &self.window.from),
            ("window.to", &self.window.to),
        ] {
            parse_wall_clock(text).map_err(|e| at(path, e))?;
        }
        let plain = !self.trace.is_empty()
            && !self.trace.contains(['/', '\\'])
            && self.trace != "."
            && self.trace != "..";
        if !plain {
            return Err(at(
                "trace",
                format!("`{}` is not a file name beside the manifest", self.trace),
            ));
        }
        if self.artifact.kind != ArtifactKind::Feedback {
            return Err(at(
                "artifact.kind",
                format!("`{}`, expected `feedback`", self.artifact.kind.name()),
            ));
        }
        if self.artifact.id != self.id {
            return Err(at(
                "id",
                format!(
                    "`{}` is not the artifact's id `{}`",
                    self.id, self.artifact.id
                ),
            ));
        }
        Ok(())
    }

    /// The half-life as a duration (checked by [`Manifest::parse`]).
    pub fn half_life(&self) -> Duration {
        parse_duration(&self.half_life).unwrap_or_default()
    }

    /// When it was saved, µs since the epoch (checked by [`Manifest::parse`]).
    pub fn created_us(&self) -> i64 {
        parse_wall_clock(&self.created).unwrap_or(0)
    }

    /// Its weight at `now_us` (µs since the epoch): the initial weight
    /// decayed by the age since `created`; a `now` before it is age 0.
    pub fn weight_at(&self, now_us: i64) -> f64 {
        let age_us = u64::try_from(now_us - self.created_us()).unwrap_or(0);
        weight_at(
            self.initial_weight,
            Duration::from_micros(age_us),
            self.half_life(),
        )
    }
}

#[cfg(test)]
mod tests;
