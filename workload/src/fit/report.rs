//! Putting the parts of a fit together: the report `--json` prints, the
//! model file it carries, and the `--compare` table.

use serde::Serialize;
use sluice_filters::Arrival;

use super::arrival::{fit_arrivals, ArrivalFit};
use super::gof::KL_DEFINITION;
use super::lengths::{copula_rho, fit_lengths, spearman, TokenLengths, CORRELATED};
use super::model::{ArrivalModel, RateCurve, Source, TokenCorrelation, WorkloadModel};
use super::round::sig;
use super::sessions::{fit_sessions, Quantiles, ThinkTime};
use super::windows::{windows, Window};
use super::{FitBuilder, FitOptions, MODEL_VERSION};
use crate::trace::{dispersion, QUANTISED_ZERO_SHARE};

/// Under this many inter-arrival times the fit says it is rough.
const FEW_GAPS: usize = 100;

/// What `sluice fit --json` prints. The request arrivals' `best`,
/// `samples` and `candidates` are at the top.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fitted {
    pub v: u32,
    pub requests: u64,
    #[serde(flatten)]
    pub arrival: ArrivalFit,
    pub zero_iat_share: f64,
    pub window_s: f64,
    pub windows: Vec<Window>,
    pub idc_1s: Option<f64>,
    pub idc_10s: Option<f64>,
    pub idc_60s: Option<f64>,
    pub input_tokens: Option<TokenLengths>,
    pub output_tokens: Option<TokenLengths>,
    pub token_spearman: Option<f64>,
    pub sessions: Option<SessionsReport>,
    pub kl_definition: &'static str,
    pub warnings: Vec<String>,
    /// What `-o` writes.
    pub model: WorkloadModel,
}

/// The sessions of a trace with session ids.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionsReport {
    pub sessions: u64,
    pub turns: Quantiles,
    pub think_time: Option<ThinkTime>,
    /// The KS statistic of the lognormal think time (kept when at most 0.05).
    pub think_lognormal_ks: Option<f64>,
    /// The fit of the gaps between session starts: the model's `arrival`.
    pub arrival: Option<ArrivalFit>,
}

pub(crate) fn build(
    b: FitBuilder,
    options: &FitOptions,
    mut source: Source,
) -> Result<Fitted, String> {
    let arrivals = b.arrivals;
    let n = arrivals.len();
    let gaps: Vec<u64> = arrivals.windows(2).map(|w| w[1] - w[0]).collect();
    let zeros = gaps.iter().filter(|g| **g == 0).count();
    let zero_share = zeros as f64 / gaps.len().max(1) as f64;
    let positive: Vec<f64> = gaps
        .iter()
        .filter(|g| **g > 0)
        .map(|g| *g as f64 / 1e6)
        .collect();
    let mut warnings = Vec::new();
    if zero_share > QUANTISED_ZERO_SHARE {
        warnings.push(format!(
            "{}% of inter-arrival times are exactly 0: the timestamps look quantised; the fit \
             is of the {} gaps above 0, so it understates the bursts",
            sig(zero_share * 100.0),
            positive.len()
        ));
    }
    if positive.len() < 2 {
        return Err(format!(
            "{} of {} inter-arrival times are above 0: a fit needs at least 2",
            positive.len(),
            gaps.len()
        ));
    }
    if positive.len() < FEW_GAPS {
        warnings.push(format!(
            "only {} inter-arrival times: too few samples for a close fit (the mixture needs \
             hundreds)",
            positive.len()
        ));
    }
    let arrival = fit_arrivals(positive, "requests")
        .ok_or_else(|| "no arrival kind fits the inter-arrival times".to_owned())?;
    warnings.extend(arrival.warnings.iter().cloned());
    let width_us = u64::try_from(options.window.as_micros()).unwrap_or(u64::MAX);
    let request_windows = windows(&arrivals, width_us);
    let input_tokens = fit_lengths(&b.input, "input_tokens", &mut warnings);
    let output_tokens = fit_lengths(&b.output, "output_tokens", &mut warnings);
    let token_spearman = spearman(&b.pairs).map(sig);
    let token_correlation =
        token_spearman
            .filter(|s| s.abs() > CORRELATED)
            .map(|s| TokenCorrelation {
                spearman: s,
                rho: sig(copula_rho(s)),
            });
    let sessions = fit_sessions(b.sessions, &b.loose);
    if let Some(s) = sessions.as_ref().and_then(|s| s.starts.as_ref()) {
        warnings.extend(s.warnings.iter().cloned());
    }
    // With sessions the model's arrivals are the session starts.
    let (process, curve_windows) = match &sessions {
        Some(s) => match &s.starts {
            Some(starts) => (starts.best.clone(), windows(&s.starts_us, width_us)),
            None => {
                warnings.push(
                    "sessions: too few session starts to fit their arrivals; the model's \
                     arrival is of requests"
                        .to_owned(),
                );
                (arrival.best.clone(), request_windows.clone())
            }
        },
        None => (arrival.best.clone(), request_windows.clone()),
    };
    let window_s = sig(options.window.as_secs_f64());
    source.requests = n as u64;
    let model = WorkloadModel {
        v: MODEL_VERSION,
        arrival: ArrivalModel {
            process,
            rate_curve: Some(RateCurve {
                window_s,
                rates: curve_windows.iter().map(|w| w.rate).collect(),
            }),
        },
        input_tokens: input_tokens.clone(),
        output_tokens: output_tokens.clone(),
        token_correlation,
        sessions: sessions.as_ref().map(|s| s.model.clone()),
        source,
    };
    model
        .validate()
        .map_err(|e| format!("the fitted model is not valid: {e}"))?;
    let window = |seconds: u64| dispersion(&arrivals, seconds * 1_000_000).map(sig);
    Ok(Fitted {
        v: MODEL_VERSION,
        requests: n as u64,
        arrival,
        zero_iat_share: sig(zero_share),
        window_s,
        windows: request_windows,
        idc_1s: window(1),
        idc_10s: window(10),
        idc_60s: window(60),
        input_tokens,
        output_tokens,
        token_spearman,
        sessions: sessions.map(|s| SessionsReport {
            sessions: s.sessions as u64,
            turns: s.model.turns,
            think_time: s.model.think_time,
            think_lognormal_ks: s.think_lognormal_ks.map(sig),
            arrival: s.starts,
        }),
        kl_definition: KL_DEFINITION,
        warnings,
        model,
    })
}

/// The candidates side by side: KL, KS, AIC, BIC and the parameters, the
/// one BIC picks marked `*`.
pub fn compare_table(fit: &ArrivalFit) -> String {
    let opt = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{}", sig(v)));
    let mut rows = vec![[
        "kind".to_owned(),
        "KL".to_owned(),
        "KS".to_owned(),
        "AIC".to_owned(),
        "BIC".to_owned(),
        "parameters".to_owned(),
    ]];
    for c in &fit.candidates {
        let mark = if c.arrival == fit.best { "*" } else { " " };
        rows.push([
            format!("{mark}{}", c.arrival.kind()),
            opt(c.kl),
            format!("{}", sig(c.ks)),
            format!("{:.1}", c.aic),
            format!("{:.1}", c.bic),
            params_text(&c.arrival),
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|r| {
            let cells: Vec<String> = r
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (cell, w))| match i {
                    0 | 5 => format!("{cell:<w$}"),
                    _ => format!("{cell:>w$}"),
                })
                .collect();
            cells.join("  ").trim_end().to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `shape=0.5 scale=0.2`; a mixture's components joined by ` + `.
pub(crate) fn params_text(a: &Arrival) -> String {
    match a {
        Arrival::Exponential { rate } => format!("rate={rate}/s"),
        Arrival::Gamma { shape, scale } | Arrival::Weibull { shape, scale } => {
            format!("shape={shape} scale={scale}s")
        }
        Arrival::Lognormal { mu, sigma } => format!("mu={mu} sigma={sigma}"),
        Arrival::WeibullMixture { components } => components
            .iter()
            .map(|c| format!("{}×(shape={} scale={}s)", c.weight, c.shape, c.scale))
            .collect::<Vec<_>>()
            .join(" + "),
    }
}
