//! The price table, and what tokens cost by it. One table serves both
//! halves: `sluice capacity` prices a stage's achieved throughput with it,
//! and the proxy's config can carry the same table. A GPU-hour price is
//! paid by time whatever flows; a price per 1k tokens is paid by what the
//! meter counted.

mod metrics;

pub use metrics::{CostMeter, CostMetrics, COST_METRIC, COST_TOKENS_METRIC};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{PathError, PathErrors};

/// `cost:` as written: `{gpu_hour: 2.5, gpus: 1}` or `{models: {NAME:
/// {input_per_1k: 0.0005, output_per_1k: 0.0015}}}`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawPrice {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_hour: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpus: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub models: Option<BTreeMap<String, ModelPrice>>,
}

/// USD per 1k input and per 1k output tokens of one model.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    pub input_per_1k: f64,
    pub output_per_1k: f64,
}

/// A checked price table.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Price {
    /// USD an hour for each GPU, and how many serve.
    GpuHour { usd_per_hour: f64, gpus: f64 },
    /// By model id, as the meter names it.
    PerToken(BTreeMap<String, ModelPrice>),
}

/// Tokens over a span of time, of one model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Usage<'a> {
    pub model: &'a str,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub seconds: f64,
}

impl RawPrice {
    /// The table, or every problem with its path under `at` (`cost`).
    pub fn validate(&self, at: &str) -> Result<Price, PathErrors> {
        let mut errors = Vec::new();
        let mut bad = |path: String, message: String| errors.push(PathError { path, message });
        let positive = |v: f64| v.is_finite() && v > 0.0;
        let nonnegative = |v: f64| v.is_finite() && v >= 0.0;
        let price = match (self.gpu_hour, self.gpus, &self.models) {
            (Some(_), _, Some(_)) => {
                bad(at.into(), "give `gpu_hour` or `models`, not both".into());
                None
            }
            (None, None, None) => {
                bad(
                    at.into(),
                    "give `gpu_hour` (with `gpus`) or `models`".into(),
                );
                None
            }
            (None, Some(_), None) => {
                bad(format!("{at}.gpus"), "needs `gpu_hour`".into());
                None
            }
            (Some(usd), gpus, None) => {
                let gpus = gpus.unwrap_or(1.0);
                if !positive(usd) {
                    bad(
                        format!("{at}.gpu_hour"),
                        format!("must be a price > 0, found {usd}"),
                    );
                }
                if !positive(gpus) {
                    bad(format!("{at}.gpus"), format!("must be > 0, found {gpus}"));
                }
                Some(Price::GpuHour {
                    usd_per_hour: usd,
                    gpus,
                })
            }
            (None, _, Some(models)) => {
                if models.is_empty() {
                    bad(format!("{at}.models"), "is empty".into());
                }
                for (name, p) in models {
                    for (key, v) in [
                        ("input_per_1k", p.input_per_1k),
                        ("output_per_1k", p.output_per_1k),
                    ] {
                        if !nonnegative(v) {
                            bad(
                                format!("{at}.models.{name}.{key}"),
                                format!("must be a price ≥ 0, found {v}"),
                            );
                        }
                    }
                }
                Some(Price::PerToken(models.clone()))
            }
        };
        match price {
            Some(p) if errors.is_empty() => Ok(p),
            _ => Err(PathErrors(errors)),
        }
    }
}

impl Price {
    /// USD for `usage`; `None` for a model the per-token table lacks.
    pub fn cost_usd(&self, usage: &Usage<'_>) -> Option<f64> {
        match self {
            Price::GpuHour { usd_per_hour, gpus } => {
                Some(usd_per_hour * gpus * usage.seconds / 3600.0)
            }
            Price::PerToken(models) => Some(
                models
                    .get(usage.model)?
                    .usd(usage.input_tokens, usage.output_tokens),
            ),
        }
    }
}

impl ModelPrice {
    /// USD for `input` and `output` tokens.
    pub fn usd(&self, input: u64, output: u64) -> f64 {
        (input as f64 * self.input_per_1k + output as f64 * self.output_per_1k) / 1000.0
    }
}

/// USD per 1k tokens (input and output together), `None` with no tokens.
pub fn cost_per_1k(usd: f64, tokens: u64) -> Option<f64> {
    (tokens > 0).then(|| usd * 1000.0 / tokens as f64)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn raw(yaml: &str) -> RawPrice {
        serde_norway::from_str(yaml).unwrap()
    }

    #[test]
    fn a_gpu_hour_by_hand() {
        // $2.50 an hour on 2 GPUs is $5/h; 1,000 tokens a second for an
        // hour is 3.6M tokens: $5 / 3,600 = $0.001389 per 1k.
        let p = raw("{gpu_hour: 2.5, gpus: 2}").validate("cost").unwrap();
        let usage = Usage {
            model: "any",
            input_tokens: 1_800_000,
            output_tokens: 1_800_000,
            seconds: 3600.0,
        };
        let usd = p.cost_usd(&usage).unwrap();
        assert!((usd - 5.0).abs() < 1e-12);
        let per_1k = cost_per_1k(usd, 3_600_000).unwrap();
        assert!((per_1k - 5.0 / 3600.0).abs() < 1e-15, "{per_1k}");
        assert_eq!(
            raw("{gpu_hour: 2.5}").validate("cost").unwrap(),
            Price::GpuHour {
                usd_per_hour: 2.5,
                gpus: 1.0
            }
        );
    }

    #[test]
    fn per_token_prices_by_model() {
        let p = raw("{models: {m: {input_per_1k: 0.0005, output_per_1k: 0.0015}}}")
            .validate("cost")
            .unwrap();
        let usage = Usage {
            model: "m",
            input_tokens: 10_000,
            output_tokens: 2_000,
            seconds: 1.0,
        };
        // 10 × 0.0005 + 2 × 0.0015 = 0.008 USD for 12k tokens.
        assert!((p.cost_usd(&usage).unwrap() - 0.008).abs() < 1e-15);
        assert_eq!(
            p.cost_usd(&Usage {
                model: "other",
                ..usage
            }),
            None
        );
        assert_eq!(cost_per_1k(1.0, 0), None);
    }

    #[test]
    fn bad_tables_are_named_by_path() {
        let text = |yaml: &str| raw(yaml).validate("cost").unwrap_err().to_string();
        assert_eq!(
            text("{gpu_hour: 0, gpus: -1}"),
            "cost.gpu_hour: must be a price > 0, found 0\ncost.gpus: must be > 0, found -1"
        );
        assert_eq!(
            text("{}"),
            "cost: give `gpu_hour` (with `gpus`) or `models`"
        );
        assert_eq!(text("{gpus: 2}"), "cost.gpus: needs `gpu_hour`");
        assert_eq!(
            text("{gpu_hour: 1, models: {}}"),
            "cost: give `gpu_hour` or `models`, not both"
        );
        assert_eq!(text("{models: {m: {input_per_1k: -1, output_per_1k: .nan}}}"), "cost.models.m.input_per_1k: must be a price ≥ 0, found -1\ncost.models.m.output_per_1k: must be a price ≥ 0, found NaN");
        let unknown = serde_norway::from_str::<RawPrice>("{gpu_hours: 1}")
            .unwrap_err()
            .to_string();
        assert!(
            unknown.starts_with("unknown field `gpu_hours`"),
            "{unknown}"
        );
    }
}
