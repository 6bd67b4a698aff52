//! Fitting a workload model to a trace (`sluice fit`): the inter-arrival
//! times against five kinds (exponential, gamma, Weibull, lognormal, a
//! two-Weibull mixture by EM), chosen by BIC and scored by KS and KL; the
//! rate over time in windows; token lengths as truncated lognormals with a
//! cap; sessions. Pure but for [`fit_file`], which reads the trace and
//! hashes it, and [`write_model`]. A fit is whole or not at all: a bad row
//! or a trace with nothing to fit is an error, and no model is written.

mod arrival;
mod dist;
mod em;
mod gof;
mod lengths;
mod model;
mod optimize;
mod report;
mod round;
mod sessions;
mod single;
mod windows;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use sluice_filters::{format_rfc3339, TraceLine};

use crate::files::{sha256_file, write_atomically};
use crate::trace::{for_each_row, seconds_text, Format, Refused, TraceError, TraceReader};
use sessions::Turn;

pub use arrival::{ArrivalFit, Candidate};
pub(crate) use dist::cdf as arrival_cdf;
pub use gof::KL_DEFINITION;
pub use lengths::{Cap, TokenLengths};
pub use model::{ArrivalModel, RateCurve, Source, TokenCorrelation, WorkloadModel, MODEL_VERSION};
pub(crate) use report::params_text;
pub use report::{compare_table, Fitted, SessionsReport};
pub use sessions::{Quantiles, SessionModel, ThinkTime};
pub use windows::Window;

/// Requests a fit needs (two inter-arrival times).
pub const MIN_REQUESTS: usize = 3;

/// Windows of the rate curve a fit may cut a trace into.
pub const MAX_WINDOWS: u64 = 1_000_000;

/// How to fit.
#[derive(Clone, Debug)]
pub struct FitOptions {
    /// Of the rate curve and the per-window records.
    pub window: Duration,
}

impl Default for FitOptions {
    fn default() -> FitOptions {
        FitOptions {
            window: Duration::from_secs(60),
        }
    }
}

/// Why there is no fit.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    /// The trace does not read (its file and line).
    #[error("{0}")]
    Trace(#[from] TraceError),
    /// The trace reads but there is nothing to fit.
    #[error("{file}: {message}")]
    Data { file: String, message: String },
    /// The model file could not be written.
    #[error("{file}: {message}")]
    Write { file: String, message: String },
}

/// Collects rows as they are read: arrivals, lengths, sessions.
///
/// The recorder writes a line when its request ends, so in a sluice trace
/// a long answer's line comes after the lines of requests that arrived
/// later: its rows are put in arrival order here. The public formats are
/// written in arrival order, and a row of theirs that goes back in time is
/// refused.
#[derive(Debug, Default)]
pub struct FitBuilder {
    /// Rows come in the order their requests ended (sluice JSONL).
    in_end_order: bool,
    arrivals: Vec<u64>,
    input: Vec<u64>,
    output: Vec<u64>,
    pairs: Vec<(u64, u64)>,
    sessions: HashMap<String, Vec<Turn>>,
    /// Arrivals of the rows without a session id: sessions of one turn,
    /// when the trace has sessions.
    loose: Vec<u64>,
}

impl FitBuilder {
    /// A builder for rows of `format`.
    pub fn new(format: Format) -> FitBuilder {
        FitBuilder {
            in_end_order: format == Format::Sluice,
            ..FitBuilder::default()
        }
    }

    /// Refuses a row that arrives before the one before it, unless rows
    /// come in the order requests ended.
    pub fn add(&mut self, line: &TraceLine) -> Result<(), String> {
        let last = self.arrivals.last().filter(|_| !self.in_end_order);
        if let Some(last) = last.filter(|l| **l > line.arrival_us) {
            return Err(format!(
                "arrival {} s is before the previous row's {} s: the trace must be sorted by \
                 arrival",
                seconds_text(line.arrival_us),
                seconds_text(*last)
            ));
        }
        self.arrivals.push(line.arrival_us);
        self.input.extend(line.input_tokens);
        self.output.extend(line.output_tokens);
        if let (Some(i), Some(o)) = (line.input_tokens, line.output_tokens) {
            self.pairs.push((i, o));
        }
        if let Some(session) = &line.session_id {
            self.sessions
                .entry(session.clone())
                .or_default()
                .push(Turn {
                    arrival_us: line.arrival_us,
                    e2e_ms: line.e2e_ms,
                    think_ms: line.think_time_ms,
                });
        } else {
            self.loose.push(line.arrival_us);
        }
        Ok(())
    }

    /// The fit; `source` is filled in but for `requests`, which is counted
    /// here. `file` names the trace in errors.
    pub fn finish(
        mut self,
        file: &str,
        options: &FitOptions,
        source: Source,
    ) -> Result<Fitted, FitError> {
        // Sessions' turns are put in order by `fit_sessions`.
        if self.in_end_order {
            self.arrivals.sort_unstable();
        }
        let data = |message: String| FitError::Data {
            file: file.to_owned(),
            message,
        };
        let n = self.arrivals.len();
        if n < MIN_REQUESTS {
            let what = match n {
                0 => "no requests".to_owned(),
                1 => "1 request".to_owned(),
                n => format!("{n} requests"),
            };
            return Err(data(format!(
                "{what}: a fit needs at least {MIN_REQUESTS} (two inter-arrival times)"
            )));
        }
        if self.arrivals[0] == self.arrivals[n - 1] {
            return Err(data(format!(
                "all {n} requests arrive at the same instant ({} s): there is no inter-arrival \
                 time to fit",
                seconds_text(self.arrivals[0])
            )));
        }
        let span_us = self.arrivals[n - 1] - self.arrivals[0];
        let width_us = u64::try_from(options.window.as_micros()).unwrap_or(u64::MAX);
        if width_us == 0 || span_us / width_us > MAX_WINDOWS {
            return Err(data(format!(
                "a window of {} s cuts the trace's {} s into more than {MAX_WINDOWS} windows: \
                 take a longer one",
                seconds_text(width_us),
                seconds_text(span_us)
            )));
        }
        report::build(self, options, source).map_err(data)
    }
}

/// Fits every arrival kind to inter-arrival times in seconds, each finite
/// and > 0 (the first bad one is refused with its index).
pub fn fit_gaps(gaps_s: Vec<f64>) -> Result<ArrivalFit, String> {
    if let Some((i, g)) = gaps_s
        .iter()
        .enumerate()
        .find(|(_, g)| !(g.is_finite() && **g > 0.0))
    {
        return Err(format!("gap {i}: {g} is not a time > 0"));
    }
    if gaps_s.len() < 2 {
        return Err(format!("{} gaps: a fit needs at least 2", gaps_s.len()));
    }
    arrival::fit_arrivals(gaps_s, "gaps").ok_or_else(|| "no arrival kind fits the gaps".to_owned())
}

/// Reads `path` (in `from`, or the format its content shows) and fits it;
/// `now_unix_us` is the `fitted_at` of the model.
pub fn fit_file(
    path: &Path,
    from: Option<Format>,
    options: &FitOptions,
    now_unix_us: i64,
) -> Result<Fitted, FitError> {
    let mut reader = TraceReader::open(path, from)?;
    let mut builder = FitBuilder::new(reader.format());
    for_each_row(&mut reader, false, |line| {
        builder.add(line).map_err(Refused::Row)
    })?;
    let name = path.display().to_string();
    let source = Source {
        trace: name.clone(),
        sha256: sha256_file(path).map_err(|e| FitError::Data {
            file: name.clone(),
            message: e.to_string(),
        })?,
        requests: 0,
        fitted_at: format_rfc3339(now_unix_us),
    };
    builder.finish(&name, options, source)
}

/// [`fit_file`], then the model written to `out` when there is one: only
/// a whole fit writes it.
pub fn fit_to(
    path: &Path,
    from: Option<Format>,
    options: &FitOptions,
    out: Option<&Path>,
    now_unix_us: i64,
) -> Result<Fitted, FitError> {
    let fitted = fit_file(path, from, options, now_unix_us)?;
    if let Some(out) = out {
        write_model(out, &fitted.model)?;
    }
    Ok(fitted)
}

/// Writes the model beside `path` and renames it over `path`, so that a
/// failure leaves no half file.
pub fn write_model(path: &Path, model: &WorkloadModel) -> Result<(), FitError> {
    let file = path.display().to_string();
    let error = |e: std::io::Error| FitError::Write {
        file: file.clone(),
        message: e.to_string(),
    };
    write_atomically(path, model.to_yaml().as_bytes()).map_err(error)
}

#[cfg(test)]
mod tests;
