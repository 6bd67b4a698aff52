//! Sessions: turns per session, the think time between turns (a lognormal,
//! or a few quantiles when the lognormal fits badly), and the arrival
//! process of new sessions.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use sluice_filters::Arrival;

use super::arrival::{fit_arrivals, ArrivalFit};
use super::gof::{ks, Sample};
use super::round::sig;
use super::single;

/// The lognormal is kept for the think time when its KS statistic is at
/// most this; otherwise the quantiles are.
pub(crate) const THINK_KS: f64 = 0.05;
/// Think times needed to fit any.
const MIN_THINK: usize = 10;

/// `sessions:` of the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionModel {
    pub turns: Quantiles,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_time: Option<ThinkTime>,
}

/// Seconds from the end of one answer to the next turn of the session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ThinkTime {
    /// ln(seconds) is normal.
    Lognormal { mu: f64, sigma: f64 },
    /// Linear between the quantiles.
    Empirical { quantiles: Quantiles },
}

/// A distribution as a few quantiles (nearest rank), read by linear
/// interpolation between them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quantiles {
    pub min: f64,
    pub p10: f64,
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Quantiles {
    /// `values` sorted ascending, not empty.
    pub(crate) fn of(sorted: &[f64]) -> Quantiles {
        let n = sorted.len();
        let at = |q: f64| sig(sorted[((q * n as f64).ceil() as usize).clamp(1, n) - 1]);
        Quantiles {
            min: sig(sorted[0]),
            p10: at(0.10),
            p25: at(0.25),
            p50: at(0.50),
            p75: at(0.75),
            p90: at(0.90),
            p99: at(0.99),
            max: sig(sorted[n - 1]),
        }
    }

    pub(crate) fn values(&self) -> [(&'static str, f64); 8] {
        [
            ("min", self.min),
            ("p10", self.p10),
            ("p25", self.p25),
            ("p50", self.p50),
            ("p75", self.p75),
            ("p90", self.p90),
            ("p99", self.p99),
            ("max", self.max),
        ]
    }
}

/// One turn as the trace has it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Turn {
    pub(crate) arrival_us: u64,
    pub(crate) e2e_ms: Option<f64>,
    pub(crate) think_ms: Option<f64>,
}

/// What the sessions give: the model part, the fit of session starts, and
/// the KS of the think-time lognormal.
#[derive(Debug)]
pub(crate) struct SessionFit {
    pub(crate) model: SessionModel,
    pub(crate) starts: Option<ArrivalFit>,
    pub(crate) sessions: usize,
    pub(crate) think_lognormal_ks: Option<f64>,
    /// The first arrival of each session, sorted (µs).
    pub(crate) starts_us: Vec<u64>,
}

/// `None` when no session has two turns (then the trace is requests).
/// `loose` are the arrivals of rows without a session id: each a session
/// of one turn.
pub(crate) fn fit_sessions(
    sessions: HashMap<String, Vec<Turn>>,
    loose: &[u64],
) -> Option<SessionFit> {
    if !sessions.values().any(|turns| turns.len() >= 2) {
        return None;
    }
    let mut turns: Vec<f64> = Vec::with_capacity(sessions.len());
    let mut starts: Vec<u64> = Vec::with_capacity(sessions.len());
    let mut think: Vec<f64> = Vec::new();
    for mut session in sessions.into_values() {
        session.sort_by_key(|t| t.arrival_us);
        turns.push(session.len() as f64);
        starts.push(session[0].arrival_us);
        for pair in session.windows(2) {
            let gap_ms = (pair[1].arrival_us - pair[0].arrival_us) as f64 / 1000.0;
            // The recorded think time, else the gap less the previous answer.
            let ms = pair[1]
                .think_ms
                .unwrap_or_else(|| gap_ms - pair[0].e2e_ms.unwrap_or(0.0));
            think.push(ms.max(0.0) / 1000.0);
        }
    }
    turns.extend(loose.iter().map(|_| 1.0));
    starts.extend_from_slice(loose);
    turns.sort_unstable_by(f64::total_cmp);
    starts.sort_unstable();
    think.sort_unstable_by(f64::total_cmp);
    let (think_time, think_lognormal_ks) = fit_think(&think);
    let gaps: Vec<f64> = starts
        .windows(2)
        .map(|w| (w[1] - w[0]) as f64 / 1e6)
        .filter(|g| *g > 0.0)
        .collect();
    Some(SessionFit {
        model: SessionModel {
            turns: Quantiles::of(&turns),
            think_time,
        },
        starts: (gaps.len() >= 2)
            .then(|| fit_arrivals(gaps, "session starts"))
            .flatten(),
        sessions: turns.len(),
        think_lognormal_ks,
        starts_us: starts,
    })
}

/// The lognormal (by maximum likelihood on the positive think times) when
/// its KS against every think time is at most [`THINK_KS`], else the
/// quantiles.
fn fit_think(sorted: &[f64]) -> (Option<ThinkTime>, Option<f64>) {
    if sorted.len() < MIN_THINK {
        return (None, None);
    }
    let positive: Vec<f64> = sorted.iter().copied().filter(|t| *t > 0.0).collect();
    let empirical = ThinkTime::Empirical {
        quantiles: Quantiles::of(sorted),
    };
    if positive.len() < MIN_THINK {
        return (Some(empirical), None);
    }
    let (mu, sigma) = single::lognormal(&Sample::new(positive));
    let lognormal = Arrival::Lognormal {
        mu: sig(mu),
        sigma: sig(sigma),
    };
    if sigma.is_nan() || sigma <= 0.0 {
        return (Some(empirical), None);
    }
    let d = ks(&lognormal, sorted);
    let chosen = if d <= THINK_KS {
        ThinkTime::Lognormal {
            mu: sig(mu),
            sigma: sig(sigma),
        }
    } else {
        empirical
    };
    (Some(chosen), Some(d))
}
