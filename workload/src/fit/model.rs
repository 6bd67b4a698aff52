//! The model file: what `sluice fit -o model.yaml` writes and `sluice load`
//! reads as its `workload:` block. With sessions, `arrival` describes
//! session starts and turns follow with their think time; without, it
//! describes requests. Times are in seconds. Read in two stages: serde
//! (unknown fields refused, the path of the first problem) and then
//! `validate`, which names every wrong value by its path.

use std::path::Path;

use serde::{Deserialize, Serialize};
use sluice_filters::{Arrival, PathError, PathErrors};

use super::lengths::TokenLengths;
use super::sessions::{Quantiles, SessionModel, ThinkTime};

/// The model file's version.
pub const MODEL_VERSION: u32 = 1;

/// A fitted workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadModel {
    pub v: u32,
    pub arrival: ArrivalModel,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<TokenLengths>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<TokenLengths>,
    /// Present when prompt and answer lengths are correlated (|Spearman| >
    /// 0.1): pairs are drawn through a Gaussian copula.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_correlation: Option<TokenCorrelation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<SessionModel>,
    pub source: Source,
}

/// `arrival:`: the gaps' distribution (`kind` and its parameters, as
/// [`Arrival`]) and the rate over time a replay follows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArrivalModel {
    #[serde(flatten)]
    pub process: Arrival,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_curve: Option<RateCurve>,
}

/// Arrivals per second in consecutive windows of `window_s` seconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateCurve {
    pub window_s: f64,
    pub rates: Vec<f64>,
}

/// The Gaussian copula of (input, output) lengths: `rho` is the normal
/// correlation, 2 sin(π `spearman` / 6).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenCorrelation {
    pub spearman: f64,
    pub rho: f64,
}

/// Where the model comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub trace: String,
    /// Of the trace file's bytes, hex.
    pub sha256: String,
    pub requests: u64,
    /// RFC 3339, UTC.
    pub fitted_at: String,
}

impl WorkloadModel {
    /// Reads and validates a model (YAML, or JSON).
    pub fn from_yaml(text: &str) -> Result<WorkloadModel, PathErrors> {
        let model: WorkloadModel = crate::files::from_yaml(text)?;
        model.validate()?;
        Ok(model)
    }

    pub fn read(path: &Path) -> Result<WorkloadModel, PathErrors> {
        let text = crate::files::read_text(path)?;
        WorkloadModel::from_yaml(&text)
    }

    pub fn to_yaml(&self) -> String {
        // Plain structs of numbers and strings: serialising cannot fail.
        serde_norway::to_string(self).unwrap_or_default()
    }

    /// Every value out of its range, by path.
    pub fn validate(&self) -> Result<(), PathErrors> {
        let mut errors = Vec::new();
        let mut error = |path: &str, message: String| {
            errors.push(PathError {
                path: path.to_owned(),
                message,
            })
        };
        if self.v != MODEL_VERSION {
            error(
                "v",
                format!(
                    "unsupported model version {} (this sluice reads {MODEL_VERSION})",
                    self.v
                ),
            );
        }
        if let Err(list) = self.arrival.process.validate() {
            for e in list {
                match e.split_once(": ") {
                    Some((field, what)) => error(&format!("arrival.{field}"), what.to_owned()),
                    None => error("arrival", e),
                }
            }
        }
        if let Some(curve) = &self.arrival.rate_curve {
            if !(curve.window_s.is_finite() && curve.window_s > 0.0) {
                error(
                    "arrival.rate_curve.window_s",
                    format!("must be a finite number > 0, found {}", curve.window_s),
                );
            }
            if curve.rates.is_empty() {
                error("arrival.rate_curve.rates", "is empty".to_owned());
            }
            for (i, r) in curve.rates.iter().enumerate() {
                if !(r.is_finite() && *r >= 0.0) {
                    error(
                        &format!("arrival.rate_curve.rates[{i}]"),
                        format!("must be a finite number >= 0, found {r}"),
                    );
                }
            }
        }
        for (name, lengths) in [
            ("input_tokens", &self.input_tokens),
            ("output_tokens", &self.output_tokens),
        ] {
            if let Some(l) = lengths {
                check_lengths(name, l, &mut error);
            }
        }
        if let Some(c) = &self.token_correlation {
            for (name, value) in [("spearman", c.spearman), ("rho", c.rho)] {
                if value.is_nan() || value.abs() > 1.0 {
                    error(
                        &format!("token_correlation.{name}"),
                        format!("must be in [-1, 1], found {value}"),
                    );
                }
            }
        }
        if let Some(s) = &self.sessions {
            check_quantiles("sessions.turns", &s.turns, 1.0, &mut error);
            match &s.think_time {
                Some(ThinkTime::Lognormal { mu, sigma }) => {
                    if !mu.is_finite() {
                        error(
                            "sessions.think_time.mu",
                            format!("must be a finite number, found {mu}"),
                        );
                    }
                    if !(sigma.is_finite() && *sigma > 0.0) {
                        error(
                            "sessions.think_time.sigma",
                            format!("must be a finite number > 0, found {sigma}"),
                        );
                    }
                }
                Some(ThinkTime::Empirical { quantiles }) => {
                    check_quantiles("sessions.think_time.quantiles", quantiles, 0.0, &mut error)
                }
                None => {}
            }
        }
        let hex = self.source.sha256.len() == 64
            && self.source.sha256.bytes().all(|b| b.is_ascii_hexdigit());
        if !hex {
            error(
                "source.sha256",
                format!("must be 64 hex digits, found `{}`", self.source.sha256),
            );
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(PathErrors(errors))
        }
    }
}

fn check_lengths(name: &str, l: &TokenLengths, error: &mut impl FnMut(&str, String)) {
    if !l.mu.is_finite() {
        error(
            &format!("{name}.mu"),
            format!("must be a finite number, found {}", l.mu),
        );
    }
    if !(l.sigma.is_finite() && l.sigma > 0.0) {
        error(
            &format!("{name}.sigma"),
            format!("must be a finite number > 0, found {}", l.sigma),
        );
    }
    if l.min < 1 || l.min > l.max {
        error(
            &format!("{name}.min"),
            format!(
                "must be at least 1 and at most max ({}), found {}",
                l.max, l.min
            ),
        );
    }
    if let Some(cap) = &l.cap {
        if cap.tokens < l.min || cap.tokens > l.max {
            error(
                &format!("{name}.cap.tokens"),
                format!(
                    "must be within [min, max] = [{}, {}], found {}",
                    l.min, l.max, cap.tokens
                ),
            );
        }
        if !(cap.share > 0.0 && cap.share < 1.0) {
            error(
                &format!("{name}.cap.share"),
                format!("must be between 0 and 1, found {}", cap.share),
            );
        }
    }
}

/// Finite, at least `floor`, and not decreasing.
fn check_quantiles(path: &str, q: &Quantiles, floor: f64, error: &mut impl FnMut(&str, String)) {
    let mut last = floor;
    for (name, value) in q.values() {
        if !(value.is_finite() && value >= last) {
            let what = if value.is_finite() && value < floor {
                format!("must be at least {floor}, found {value}")
            } else {
                format!(
                    "must be a finite number at least the quantile before ({last}), found {value}"
                )
            };
            error(&format!("{path}.{name}"), what);
        }
        if value.is_finite() {
            last = last.max(value);
        }
    }
}
