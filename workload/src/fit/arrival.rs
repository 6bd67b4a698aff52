//! The candidates for the inter-arrival times and the pick among them: each
//! kind fitted by maximum likelihood, scored (log-likelihood, AIC, BIC, KS,
//! KL), and the lowest BIC chosen.

use serde::ser::{Serialize, SerializeMap, Serializer};
use sluice_filters::{Arrival, WeibullComponent};

use super::em::weibull_mixture;
use super::gof::{fitness, Fitness, Sample};
use super::round::{cents, sig};
use super::single;

/// A component of a mixture this light, in expected values, is too few
/// samples to trust: the fit says so.
const MIN_COMPONENT_SAMPLES: f64 = 50.0;

/// Steps of the empirical quantiles kept with a fit (every percentile):
/// enough for `sluice report` to draw the sample's CDF beside the
/// candidates', small enough to keep in a run file.
const QUANTILE_STEPS: usize = 100;

/// One fitted kind and its figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub arrival: Arrival,
    pub loglik: f64,
    pub aic: f64,
    pub bic: f64,
    pub ks: f64,
    /// `None` when every value is the same.
    pub kl: Option<f64>,
}

/// The candidates in the order of [`Arrival::KINDS`] (a kind that cannot be
/// fitted is left out), the lowest BIC first in `best`.
#[derive(Clone, Debug, PartialEq)]
pub struct ArrivalFit {
    pub best: Arrival,
    pub candidates: Vec<Candidate>,
    /// The inter-arrival times fitted.
    pub samples: usize,
    /// The sample's own quantiles, (q, seconds) at q = 0, 0.01, …, 1
    /// (nearest rank): its empirical CDF, to draw against the candidates.
    pub quantiles: Vec<[f64; 2]>,
    pub warnings: Vec<String>,
}

/// Fits every kind to `iats` (seconds, each finite and > 0); `None` when
/// not one kind fits (under two distinct values).
pub(crate) fn fit_arrivals(iats: Vec<f64>, what: &str) -> Option<ArrivalFit> {
    let sample = Sample::new(iats);
    let mut fitted = vec![Arrival::Exponential {
        rate: single::exponential(&sample),
    }];
    if let Some((shape, scale)) = single::gamma(&sample) {
        fitted.push(Arrival::Gamma { shape, scale });
    }
    if let Some((shape, scale)) = single::weibull(&sample, None, 1.0) {
        fitted.push(Arrival::Weibull { shape, scale });
    }
    let (mu, sigma) = single::lognormal(&sample);
    if sigma > 0.0 {
        fitted.push(Arrival::Lognormal { mu, sigma });
    }
    let mut warnings = Vec::new();
    if let Some((components, _)) = weibull_mixture(&sample) {
        for (i, c) in components.iter().enumerate() {
            let expected = c.weight * sample.len() as f64;
            if expected < MIN_COMPONENT_SAMPLES {
                warnings.push(format!(
                    "{what}: weibull_mixture component {i} has weight {} (about {expected:.0} of \
                     {} samples): too few to trust its shape and scale",
                    sig(c.weight),
                    sample.len()
                ));
            }
        }
        fitted.push(Arrival::WeibullMixture { components });
    }
    let candidates: Vec<Candidate> = fitted
        .into_iter()
        .map(rounded)
        .filter(|a| a.validate().is_ok())
        .map(|arrival| {
            let Fitness {
                loglik,
                aic,
                bic,
                ks,
                kl,
            } = fitness(&arrival, &sample);
            Candidate {
                arrival,
                loglik,
                aic,
                bic,
                ks,
                kl,
            }
        })
        .filter(|c| c.loglik.is_finite())
        .collect();
    let best = candidates
        .iter()
        .min_by(|a, b| a.bic.total_cmp(&b.bic))?
        .arrival
        .clone();
    let quantiles = (0..=QUANTILE_STEPS)
        .map(|i| {
            let q = i as f64 / QUANTILE_STEPS as f64;
            [q, sig(sample.quantile(q))]
        })
        .collect();
    Some(ArrivalFit {
        best,
        candidates,
        samples: sample.len(),
        quantiles,
        warnings,
    })
}

/// The parameters as the model file writes them (four significant digits),
/// so that the figures describe the model that is written; the mixture's
/// weights are made to sum to exactly 1 after rounding.
pub(crate) fn rounded(a: Arrival) -> Arrival {
    match a {
        Arrival::Exponential { rate } => Arrival::Exponential { rate: sig(rate) },
        Arrival::Gamma { shape, scale } => Arrival::Gamma {
            shape: sig(shape),
            scale: sig(scale),
        },
        Arrival::Weibull { shape, scale } => Arrival::Weibull {
            shape: sig(shape),
            scale: sig(scale),
        },
        Arrival::Lognormal { mu, sigma } => Arrival::Lognormal {
            mu: sig(mu),
            sigma: sig(sigma),
        },
        Arrival::WeibullMixture { components } => {
            let mut components: Vec<WeibullComponent> = components
                .into_iter()
                .map(|c| WeibullComponent {
                    weight: sig(c.weight),
                    shape: sig(c.shape),
                    scale: sig(c.scale),
                })
                .collect();
            let rest: f64 = components.iter().skip(1).map(|c| c.weight).sum();
            if let Some(first) = components.first_mut() {
                first.weight = sig(1.0 - rest);
            }
            Arrival::WeibullMixture { components }
        }
    }
}

/// `{"kind", "params": {…}, "loglik", "aic", "bic", "ks", "kl"}`.
impl Serialize for Candidate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(7))?;
        map.serialize_entry("kind", self.arrival.kind())?;
        map.serialize_entry("params", &Params(&self.arrival))?;
        map.serialize_entry("loglik", &cents(self.loglik))?;
        map.serialize_entry("aic", &cents(self.aic))?;
        map.serialize_entry("bic", &cents(self.bic))?;
        map.serialize_entry("ks", &sig(self.ks))?;
        map.serialize_entry("kl", &self.kl.map(sig))?;
        map.end()
    }
}

/// An [`Arrival`]'s parameters without its `kind`, in the order of the
/// docs: `{rate}`, `{shape, scale}`, `{mu, sigma}`, `{components}`.
struct Params<'a>(&'a Arrival);

impl Serialize for Params<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        match self.0 {
            Arrival::Exponential { rate } => map.serialize_entry("rate", rate)?,
            Arrival::Gamma { shape, scale } | Arrival::Weibull { shape, scale } => {
                map.serialize_entry("shape", shape)?;
                map.serialize_entry("scale", scale)?;
            }
            Arrival::Lognormal { mu, sigma } => {
                map.serialize_entry("mu", mu)?;
                map.serialize_entry("sigma", sigma)?;
            }
            Arrival::WeibullMixture { components } => {
                map.serialize_entry("components", components)?;
            }
        }
        map.end()
    }
}

impl Serialize for ArrivalFit {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(4))?;
        map.serialize_entry("best", self.best.kind())?;
        map.serialize_entry("samples", &self.samples)?;
        map.serialize_entry("candidates", &self.candidates)?;
        map.serialize_entry("iat_quantiles", &self.quantiles)?;
        map.end()
    }
}
