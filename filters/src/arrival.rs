//! The arrival process of a workload: the distribution of the time between
//! two arrivals, as `sluice fit` writes it and `sluice load` reads it
//! (`arrival:`). One enum for both, so the names cannot drift apart. Every
//! time is in seconds: a `scale` is seconds, a `rate` is per second.
//!
//! Pure: no sampling here (the caller owns the RNG and the clock).

use serde::{Deserialize, Serialize};

/// The distribution of inter-arrival times, in seconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Arrival {
    /// A Poisson process: exponential gaps, `rate` arrivals per second.
    Exponential { rate: f64 },
    /// Gamma gaps, `shape` k and `scale` θ seconds (mean kθ). The shape is
    /// vLLM's `--burstiness` and AIPerf's `arrival-smoothness`: 1 is Poisson,
    /// below 1 burstier, above 1 smoother.
    Gamma { shape: f64, scale: f64 },
    /// Weibull gaps, `shape` k and `scale` λ seconds: CDF 1 - exp(-(x/λ)^k).
    Weibull { shape: f64, scale: f64 },
    /// Lognormal gaps: ln(x / 1 s) is normal with mean `mu`, sd `sigma`.
    Lognormal { mu: f64, sigma: f64 },
    /// A mixture of Weibulls (two, as fitted): a gap is drawn from component
    /// i with probability `weight`; the weights sum to 1.
    WeibullMixture { components: Vec<WeibullComponent> },
}

/// One component of [`Arrival::WeibullMixture`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeibullComponent {
    pub weight: f64,
    pub shape: f64,
    /// Seconds.
    pub scale: f64,
}

/// How far the mixture weights may be from summing to 1 (they are written
/// with four significant digits).
const WEIGHT_SUM_TOLERANCE: f64 = 1e-3;

impl Arrival {
    /// The names of [`Arrival`]'s kinds, as in the YAML and JSON.
    pub const KINDS: [&'static str; 5] = [
        "exponential",
        "gamma",
        "weibull",
        "lognormal",
        "weibull_mixture",
    ];

    pub fn kind(&self) -> &'static str {
        match self {
            Arrival::Exponential { .. } => "exponential",
            Arrival::Gamma { .. } => "gamma",
            Arrival::Weibull { .. } => "weibull",
            Arrival::Lognormal { .. } => "lognormal",
            Arrival::WeibullMixture { .. } => "weibull_mixture",
        }
    }

    /// Every parameter that is wrong, each as `name: what, found`: a
    /// parameter must be finite and > 0 (`mu` only finite), a mixture needs
    /// a component and weights that sum to 1. The caller prefixes its path
    /// (`arrival.`).
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut errors = Vec::new();
        let mut positive = |name: String, value: f64| {
            if !(value.is_finite() && value > 0.0) {
                errors.push(format!(
                    "{name}: must be a finite number > 0, found {value}"
                ));
            }
        };
        match self {
            Arrival::Exponential { rate } => positive("rate".into(), *rate),
            Arrival::Gamma { shape, scale } | Arrival::Weibull { shape, scale } => {
                positive("shape".into(), *shape);
                positive("scale".into(), *scale);
            }
            Arrival::Lognormal { mu, sigma } => {
                positive("sigma".into(), *sigma);
                if !mu.is_finite() {
                    errors.push(format!("mu: must be a finite number, found {mu}"));
                }
            }
            Arrival::WeibullMixture { components } => {
                for (i, c) in components.iter().enumerate() {
                    positive(format!("components[{i}].weight"), c.weight);
                    positive(format!("components[{i}].shape"), c.shape);
                    positive(format!("components[{i}].scale"), c.scale);
                }
                let sum: f64 = components.iter().map(|c| c.weight).sum();
                if components.is_empty() {
                    errors.push("components: a mixture needs at least one component".into());
                } else if sum.is_nan() || (sum - 1.0).abs() > WEIGHT_SUM_TOLERANCE {
                    // Six decimals: 0.9, not 0.8999999999999999.
                    let sum = (sum * 1e6).round() / 1e6;
                    errors.push(format!("components: weights sum to {sum}, not 1"));
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// The number of free parameters (for AIC and BIC): a mixture of m
    /// components has 3m - 1.
    pub fn parameters(&self) -> usize {
        match self {
            Arrival::Exponential { .. } => 1,
            Arrival::Gamma { .. } | Arrival::Weibull { .. } | Arrival::Lognormal { .. } => 2,
            Arrival::WeibullMixture { components } => (3 * components.len()).saturating_sub(1),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn parse(text: &str) -> Result<Arrival, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn every_kind_reads_by_its_name() {
        let cases = [
            (r#"{"kind":"exponential","rate":2.5}"#, "exponential"),
            (r#"{"kind":"gamma","shape":0.5,"scale":0.8}"#, "gamma"),
            (r#"{"kind":"weibull","shape":0.6,"scale":1}"#, "weibull"),
            (r#"{"kind":"lognormal","mu":-1,"sigma":0.9}"#, "lognormal"),
            (
                r#"{"kind":"weibull_mixture","components":[{"weight":0.7,"shape":0.8,"scale":1},{"weight":0.3,"shape":2.5,"scale":0.05}]}"#,
                "weibull_mixture",
            ),
        ];
        for (text, kind) in cases {
            let arrival = parse(text).unwrap();
            assert_eq!(arrival.kind(), kind);
            assert!(Arrival::KINDS.contains(&kind));
            assert_eq!(arrival.validate(), Ok(()));
            let back = serde_json::to_string(&arrival).unwrap();
            assert_eq!(parse(&back).unwrap(), arrival);
        }
    }

    #[test]
    fn unknown_fields_and_kinds_are_refused() {
        assert_eq!(
            parse(r#"{"kind":"gamma","shape":1,"scale":1,"rate":3}"#).unwrap_err(),
            "unknown field `rate`, expected `shape` or `scale`"
        );
        assert_eq!(
            parse(r#"{"kind":"pareto","shape":1}"#).unwrap_err(),
            "unknown variant `pareto`, expected one of `exponential`, `gamma`, `weibull`, \
             `lognormal`, `weibull_mixture` at line 1 column 16"
        );
    }

    #[test]
    fn validate_names_every_bad_parameter() {
        let bad = Arrival::Gamma {
            shape: -1.0,
            scale: f64::NAN,
        };
        assert_eq!(
            bad.validate(),
            Err(vec![
                "shape: must be a finite number > 0, found -1".to_owned(),
                "scale: must be a finite number > 0, found NaN".to_owned(),
            ])
        );
        let mixture = Arrival::WeibullMixture {
            components: vec![
                WeibullComponent {
                    weight: 0.5,
                    shape: 1.0,
                    scale: 1.0,
                },
                WeibullComponent {
                    weight: 0.3,
                    shape: 0.0,
                    scale: 1.0,
                },
            ],
        };
        assert_eq!(
            mixture.validate(),
            Err(vec![
                "components[1].shape: must be a finite number > 0, found 0".to_owned(),
                "components: weights sum to 0.8, not 1".to_owned(),
            ])
        );
        let empty = Arrival::WeibullMixture { components: vec![] };
        assert_eq!(
            empty.validate(),
            Err(vec![
                "components: a mixture needs at least one component".to_owned()
            ])
        );
        let lognormal = Arrival::Lognormal {
            mu: f64::INFINITY,
            sigma: 1.0,
        };
        assert_eq!(
            lognormal.validate(),
            Err(vec!["mu: must be a finite number, found inf".to_owned()])
        );
        assert_eq!(mixture.parameters(), 5);
    }
}
