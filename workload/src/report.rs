//! `sluice report`, the pure part: a load run's (or a capacity search's)
//! result read and checked, its distributions, the baseline diff with its
//! statistics, the attribution by layer, and the page (inline SVG and CSS,
//! nothing from the network) with its JSON twin.

mod arrivals;
mod attach;
mod diff;
mod html;
mod input;
mod layers;
mod series;
mod stages;
mod stats;
mod store;
mod svg;
mod sweep;

use serde::Serialize;
use serde_json::Value;

pub use arrivals::{Arrivals, CandidateCurve};
pub use attach::{read_fit_text, AttachedFit, FitCandidate, ARRIVAL_FIT_VERSION};
pub use diff::{DistDiff, Metric, MetricDiff, DEFAULT_METRICS};
pub use html::render_page as render_html;
pub use input::{parse_json, read_run, Dist, Group, Row, Run, StepGroup, HIST_MEASURES};
pub use layers::{Attribution, Health, Layer, Worst, GRPC_SUCCESS_MIN_PCT, SLOW_QUANTILE};
pub use series::{StageSpan, Timeline};
pub use stages::StageRow;
pub use stats::{
    bootstrap_quantile_diff, mann_whitney, two_proportions, two_rates, Interval, MannWhitney,
    LEVEL, RESAMPLES, SEED,
};
pub use store::saved as saved_baselines;
pub use store::{list_baselines, newest_baseline, save_baseline, trend_table, Saved};
pub use sweep::{is_capacity, Capacity};

/// The report file's version.
pub const REPORT_VERSION: u32 = 1;

/// What the page says of its statistics.
pub const STATISTICS: &str = "Percentiles: a seeded percentile bootstrap (1000 resamples, seed \
     0x5eed1e55) of the difference run − baseline, each side resampled from its HDR histogram's \
     bucket counts; beyond noise when the 95% interval excludes 0. Whole distributions: \
     Mann–Whitney U on the same buckets (normal approximation, tie-corrected, continuity ½), \
     two-sided, beyond noise at p < 0.05. Shares (error rate, queued, hit ratio): a pooled \
     two-proportion z-test; throughputs: a Poisson rate test on the completed requests \
     (conditional binomial, normal approximation). A change is marked regressed or improved when it is beyond noise and at \
     least the minimum change; no correction for the number of metrics is made.";

/// How to build a report.
#[derive(Clone, Debug)]
pub struct Options {
    /// The headline metrics (names as [`Metric::parse`] reads them).
    pub metrics: Vec<Metric>,
    /// A change smaller than this percent of the baseline is not a
    /// regression, even beyond noise.
    pub min_change_pct: f64,
    /// A change of a time (ms) smaller than this is not a regression
    /// either, whatever its percent.
    pub min_change_ms: f64,
    /// A fit to draw the run's inter-arrival times against (`--fit`); it
    /// replaces the run's own `arrival_fit`.
    pub fit: Option<AttachedFit>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            metrics: DEFAULT_METRICS
                .iter()
                .filter_map(|m| Metric::parse(m).ok())
                .collect(),
            min_change_pct: 5.0,
            min_change_ms: 1.0,
            fit: None,
        }
    }
}

impl Options {
    fn min_change(&self) -> diff::MinChange {
        diff::MinChange {
            pct: self.min_change_pct,
            ms: self.min_change_ms,
        }
    }
}

/// A file given to the report: a load run, or a capacity search with the
/// run of its confirmation stage.
#[derive(Clone, Debug)]
pub enum Input {
    Load(Box<Run>),
    Capacity(Box<Capacity>, Box<Run>),
}

impl Input {
    /// Reads a file's JSON; the error names where it is bad.
    pub fn read(v: &Value) -> Result<Input, String> {
        if is_capacity(v) {
            let (c, r) = sweep::read_capacity(v)?;
            return Ok(Input::Capacity(Box::new(c), Box::new(r)));
        }
        read_run(v).map(|r| Input::Load(Box::new(r)))
    }

    pub fn run(&self) -> &Run {
        match self {
            Input::Load(r) | Input::Capacity(_, r) => r,
        }
    }
}

/// Where a run comes from, as shown at the top.
#[derive(Clone, Debug, Serialize)]
pub struct Lineage {
    pub scenario: String,
    pub scenario_sha256: String,
    pub target: String,
    pub sluice_version: String,
    pub seed: Option<u64>,
    pub run_id: String,
    pub shard: String,
    pub mode: String,
    pub started_at: String,
    /// The start plus the measured duration.
    pub ended_at: Option<String>,
    pub duration_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_model: Option<String>,
    /// The run's lineage id, when its file has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The clusters, versions and models that answered each step (sluice's
    /// answer headers and the answers' `model`); empty against a bare server.
    pub seen: Vec<crate::load::Seen>,
}

fn lineage(r: &Run) -> Lineage {
    let ended_at = sluice_filters::parse_wall_clock(&r.started_at)
        .ok()
        .map(|us| sluice_filters::format_rfc3339(us + (r.duration_s() * 1e6) as i64));
    Lineage {
        scenario: r.scenario.clone(),
        scenario_sha256: r.scenario_sha256.clone(),
        target: r.target.clone(),
        sluice_version: r.sluice_version.clone(),
        seed: r.seed,
        run_id: r.run_id.clone(),
        shard: r.shard.clone(),
        mode: r.mode.clone(),
        started_at: r.started_at.clone(),
        ended_at,
        duration_s: r.duration_s(),
        from_model: r.from_model.clone(),
        id: r.lineage_id.clone(),
        seen: r.seen.clone(),
    }
}

/// The run's totals, as the cards at the top.
#[derive(Clone, Debug, Serialize)]
pub struct Totals {
    pub requests: u64,
    pub completed: u64,
    pub failed: u64,
    pub rate_limited: u64,
    pub timeouts: u64,
    pub error_rate_pct: Option<f64>,
    pub request_throughput: Option<f64>,
    pub output_throughput: Option<f64>,
    pub p99_ttft_ms: Option<f64>,
    pub p99_e2el_ms: Option<f64>,
    pub passed: bool,
    pub interrupted: bool,
}

/// A distribution's CDF, the run's and the baseline's.
#[derive(Clone, Debug, Serialize)]
pub struct Cdf {
    pub measure: &'static str,
    pub run: Vec<[f64; 2]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Vec<[f64; 2]>>,
}

/// One step's line in the steps table.
#[derive(Clone, Debug, Serialize)]
pub struct StepRow {
    pub name: String,
    pub service: String,
    pub requests: u64,
    pub failed: u64,
    pub median_service_time_ms: Option<f64>,
    pub p99_service_time_ms: Option<f64>,
    pub p99_ttft_ms: Option<f64>,
    pub cache_hits: u64,
    pub cache_misses: u64,
}

/// The diff against a baseline.
#[derive(Clone, Debug, Serialize)]
pub struct Baseline {
    pub lineage: Lineage,
    pub metrics: Vec<MetricDiff>,
    pub distributions: Vec<DistDiff>,
    /// The metrics marked regressed, run-wide and by layer (`model:
    /// p99_itl_ms`).
    pub regressions: Vec<String>,
}

/// Everything the page shows; `--json` writes it as is.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub v: u32,
    /// `load` or `capacity`.
    pub kind: &'static str,
    /// The report's own lineage id and its parents (the run's and the
    /// baseline's), set by the caller who has the options (see
    /// `crate::report_artifact`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<sluice_filters::ContentId>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parents: Vec<sluice_filters::ContentId>,
    pub lineage: Lineage,
    pub totals: Totals,
    pub thresholds: Vec<Value>,
    pub statistics: &'static str,
    pub warnings: Vec<String>,
    pub cdfs: Vec<Cdf>,
    pub dispatch_lag: Option<Cdf>,
    pub timeline: Option<Timeline>,
    /// Why there is no timeline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline_note: Option<String>,
    pub steps: Vec<StepRow>,
    /// Each stage's TTFT beside its KV-cache pressure.
    pub stages: Vec<StageRow>,
    /// A context sweep's stages against their prompt length, and its limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_sweep: Option<crate::load::SweepResult>,
    pub baseline: Option<Baseline>,
    pub attribution: Attribution,
    pub capacity: Option<Capacity>,
    /// The run's inter-arrival times against the attached fit (`--fit`, or
    /// the run's `arrival_fit`); absent when no fit is attached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<Arrivals>,
}

impl Report {
    pub fn regressed(&self) -> bool {
        self.baseline
            .as_ref()
            .is_some_and(|b| !b.regressions.is_empty())
    }
}

fn cdf_pair(run: &Group, base: Option<&Group>, m: &'static str) -> Option<Cdf> {
    Some(Cdf {
        measure: m,
        run: series::cdf(run.dist(m)?),
        baseline: base.and_then(|b| b.dist(m)).map(series::cdf),
    })
}

/// The report of `input`, against `baseline` when given.
pub fn build(input: &Input, baseline: Option<&Input>, options: &Options) -> Report {
    let run = input.run();
    let base = baseline.map(Input::run);
    let mut warnings = Vec::new();
    if let Some(b) = base {
        if b.scenario != run.scenario || b.scenario_sha256 != run.scenario_sha256 {
            warnings.push(format!(
                "the baseline ran scenario `{}` (sha256 {}), this run `{}` (sha256 {}): the \
                 comparison may not be like for like",
                b.scenario,
                short(&b.scenario_sha256),
                run.scenario,
                short(&run.scenario_sha256)
            ));
        }
    }
    if run.interrupted {
        warnings.push("this run was interrupted: its figures cover the part that ran".to_owned());
    }
    let s = &run.summary;
    let q = |m: &str| {
        s.dist(m)
            .and_then(|d| d.quantile(0.99))
            .map(|us| us as f64 / 1000.0)
    };
    let baseline = base.map(|b| {
        let side = diff::Side {
            group: s,
            duration_s: run.duration_s(),
        };
        let bside = diff::Side {
            group: &b.summary,
            duration_s: b.duration_s(),
        };
        let metrics: Vec<MetricDiff> = options
            .metrics
            .iter()
            .map(|m| diff::compare(m, side, bside, options.min_change()))
            .collect();
        Baseline {
            lineage: lineage(b),
            distributions: diff::distributions(s, &b.summary),
            regressions: metrics
                .iter()
                .filter(|d| d.verdict == "regressed")
                .map(|d| d.metric.clone())
                .collect(),
            metrics,
        }
    });
    let attribution = layers::attribute(run, base, options.min_change());
    let mut baseline = baseline;
    if let Some(b) = &mut baseline {
        for l in &attribution.layers {
            for d in l.metrics.iter().filter(|d| d.verdict == "regressed") {
                b.regressions.push(format!("{}: {}", l.layer, d.metric));
            }
        }
    }
    let timeline = run.rows.as_deref().and_then(series::timeline);
    Report {
        v: REPORT_VERSION,
        kind: match input {
            Input::Load(_) => "load",
            Input::Capacity(..) => "capacity",
        },
        id: None,
        parents: Vec::new(),
        lineage: lineage(run),
        totals: Totals {
            requests: s.requests,
            completed: s.completed,
            failed: s.failed,
            rate_limited: s.rate_limited,
            timeouts: s.timeouts,
            error_rate_pct: s.error_rate_pct(),
            request_throughput: s.metric("request_throughput"),
            output_throughput: s.metric("output_throughput"),
            p99_ttft_ms: q("ttft"),
            p99_e2el_ms: q("e2el"),
            passed: run.passed,
            interrupted: run.interrupted,
        },
        thresholds: run.thresholds.clone(),
        statistics: STATISTICS,
        warnings,
        cdfs: ["ttft", "itl", "e2el"]
            .into_iter()
            .filter_map(|m| cdf_pair(s, base.map(|b| &b.summary), m))
            .collect(),
        dispatch_lag: cdf_pair(s, base.map(|b| &b.summary), "dispatch_lag"),
        timeline_note: timeline.is_none().then(|| {
            "no latency over time: this run has no per-request rows (run `sluice load --detailed`)"
                .to_owned()
        }),
        timeline,
        steps: run
            .steps
            .iter()
            .map(|st| {
                let g = &st.group;
                let ms = |m: &str, q: f64| {
                    g.dist(m)
                        .and_then(|d| d.quantile(q))
                        .map(|u| u as f64 / 1000.0)
                };
                StepRow {
                    name: st.name.clone(),
                    service: st.service.clone(),
                    requests: g.requests,
                    failed: g.failed,
                    median_service_time_ms: ms("service_time", 0.5),
                    p99_service_time_ms: ms("service_time", 0.99),
                    p99_ttft_ms: ms("ttft", 0.99),
                    cache_hits: g.cache_hits,
                    cache_misses: g.cache_misses,
                }
            })
            .collect(),
        stages: stages::rows(run),
        context_sweep: run.context_sweep.clone(),
        baseline,
        attribution,
        capacity: match input {
            Input::Capacity(c, _) => Some((**c).clone()),
            Input::Load(_) => None,
        },
        arrivals: options.fit.as_ref().or(run.arrival_fit.as_ref()).map(|f| {
            let mut a = arrivals::arrivals(f, run.rows.as_deref(), &run.shard);
            if let Some(note) = options
                .fit
                .as_ref()
                .and_then(|given| arrivals::mismatch(given, run.arrival_fit.as_ref()?))
            {
                a.notes.push(note);
            }
            a
        }),
    }
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

#[cfg(test)]
mod tests;
