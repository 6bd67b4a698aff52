//! Attribution by layer: the steps grouped by their service (model, vector
//! store, cache, other HTTP, gRPC, and the client-side proxy/system layer),
//! each layer's metrics against the baseline, and, from `--detailed` rows,
//! the share of slow journeys whose extra time sits in that layer with the
//! trace ids of the worst of them. The gRPC layer is also held to an
//! absolute bound, baseline or not: the share of calls that ended OK.

use std::collections::BTreeMap;

use serde::Serialize;

use super::diff::{compare, Metric, MetricDiff, MinChange, Side};
use super::input::{Dist, Group, Row, Run};

/// Slow journeys: those at or above this quantile of journey time.
pub const SLOW_QUANTILE: f64 = 0.9;
/// Trace ids listed per layer.
const WORST: usize = 5;

/// The share of a run's gRPC calls that must end OK (`grpc-status` 0) for
/// the gRPC layer to be healthy: a service mesh's usual bound for calls
/// between services.
pub const GRPC_SUCCESS_MIN_PCT: f64 = 99.95;

/// The layers, in the order shown: (name, the step service, its metrics).
const LAYERS: [(&str, &str, &[&str]); 6] = [
    (
        "model",
        "llm",
        // The medians beside the p99s: a busy machine's scheduling noise
        // sits in the tail, and a slower model moves the middle too.
        &[
            "p99_ttft_ms",
            "median_itl_ms",
            "p99_itl_ms",
            "output_throughput",
        ],
    ),
    (
        "vector store",
        "vector",
        &["p99_service_time_ms", "error_rate"],
    ),
    ("cache", "redis", &["p99_service_time_ms", "hit_ratio"]),
    (
        "http service",
        "http",
        &["p99_service_time_ms", "error_rate"],
    ),
    (
        "grpc service",
        "grpc",
        &["p99_service_time_ms", "error_rate"],
    ),
    (
        "proxy/system",
        "",
        &["p99_dispatch_lag_ms", "queued_share", "late_share"],
    ),
];

/// A slow request, for the tracing UI.
#[derive(Clone, Debug, Serialize)]
pub struct Worst {
    pub journey: u64,
    pub step: String,
    /// Empty for redis steps (no traceparent).
    pub trace_id: String,
    /// The layer's time in this journey, ms.
    pub layer_ms: f64,
    /// Over the reference, ms.
    pub extra_ms: f64,
}

/// A layer against an absolute bound (the gRPC layer's success rate).
#[derive(Clone, Debug, Serialize)]
pub struct Health {
    pub metric: &'static str,
    /// Calls that ended OK, in percent of the layer's calls.
    pub value_pct: f64,
    pub min_pct: f64,
    pub ok: bool,
    /// The calls that did not end OK, by `grpc-status` (`"14"`); a failure
    /// with no status (a timeout, a refused connection) is not in it.
    pub not_ok_by_status: BTreeMap<String, u64>,
}

/// One row of the root-cause matrix.
#[derive(Clone, Debug, Serialize)]
pub struct Layer {
    pub layer: &'static str,
    pub steps: Vec<String>,
    /// Against the baseline; empty without one.
    pub metrics: Vec<MetricDiff>,
    /// The percent change of the metric that made the status (the most
    /// regressed, or improved), else of the worst-moving metric.
    pub deviation_pct: Option<f64>,
    /// `regressed` when a metric of it regressed, else `improved`,
    /// `within noise`, or `no baseline`.
    pub status: &'static str,
    /// The share of slow journeys whose largest extra time is in this
    /// layer; `None` without `--detailed` rows.
    pub confidence: Option<f64>,
    pub worst: Vec<Worst>,
    /// The gRPC layer's success rate against [`GRPC_SUCCESS_MIN_PCT`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<Health>,
}

/// The root-cause matrix and how its confidence was made.
#[derive(Clone, Debug, Serialize)]
pub struct Attribution {
    pub layers: Vec<Layer>,
    /// Slow journeys considered (at or above the run's p90 journey time).
    pub slow_journeys: usize,
    /// What the extra time is measured against.
    pub reference: &'static str,
    /// Why there is no confidence, when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The steps of one service as one group (summed counts, added buckets).
fn combine(groups: &[&Group]) -> Group {
    let mut out = Group::default();
    for g in groups {
        out.requests += g.requests;
        out.completed += g.completed;
        out.failed += g.failed;
        out.rate_limited += g.rate_limited;
        out.queued += g.queued;
        out.late += g.late;
        out.output_tokens += g.output_tokens;
        out.cache_hits += g.cache_hits;
        out.cache_misses += g.cache_misses;
        for (code, n) in &g.grpc_errors {
            *out.grpc_errors.entry(code.clone()).or_insert(0) += n;
        }
        for (m, d) in &g.dists {
            let e = out.dists.entry(m.clone()).or_default();
            let mut all: BTreeMap<u64, u64> = e.buckets.iter().copied().collect();
            for (v, c) in &d.buckets {
                *all.entry(*v).or_insert(0) += c;
            }
            *e = Dist {
                total: e.total + d.total,
                buckets: all.into_iter().collect(),
            };
        }
    }
    out
}

/// The service's steps (names) and their combined group; the system layer
/// is the whole run.
fn layer_group(run: &Run, service: &str) -> (Vec<String>, Option<Group>) {
    if service.is_empty() {
        return (Vec::new(), Some(run.summary.clone()));
    }
    let steps: Vec<_> = run.steps.iter().filter(|s| s.service == service).collect();
    let names = steps.iter().map(|s| s.name.clone()).collect();
    let groups: Vec<&Group> = steps.iter().map(|s| &s.group).collect();
    (names, (!groups.is_empty()).then(|| combine(&groups)))
}

/// The layer a row's step belongs to (an index into [`LAYERS`]).
fn row_layer(run: &Run, row: &Row) -> Option<usize> {
    let service = &run.steps.get(row.step)?.service;
    LAYERS.iter().position(|l| l.1 == service)
}

const SYSTEM: usize = LAYERS.len() - 1;

/// Per journey: its rows, its time (first intended to last end) and each
/// layer's time: service time for the services, dispatch lag for system.
struct Journey<'a> {
    index: u64,
    rows: Vec<&'a Row>,
    total_us: u64,
    layer_us: [u64; LAYERS.len()],
}

fn journeys<'a>(run: &Run, rows: &'a [Row]) -> Vec<Journey<'a>> {
    let mut by: BTreeMap<u64, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        by.entry(r.index).or_default().push(r);
    }
    by.into_iter()
        .map(|(index, rows)| {
            let start = rows.iter().map(|r| r.intended_us).min().unwrap_or(0);
            let end = rows.iter().map(|r| r.end_us).max().unwrap_or(0);
            let mut layer_us = [0; LAYERS.len()];
            for r in &rows {
                if let Some(l) = row_layer(run, r) {
                    layer_us[l] += r.end_us.saturating_sub(r.sent_us);
                }
                layer_us[SYSTEM] += r.sent_us.saturating_sub(r.intended_us);
            }
            Journey {
                index,
                rows,
                total_us: end.saturating_sub(start),
                layer_us,
            }
        })
        .collect()
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// Each layer's reference time per journey, µs, and what it is.
fn reference(
    run: &Run,
    base: Option<&Run>,
    own: &[Journey],
) -> ([u64; LAYERS.len()], &'static str) {
    let medians = |js: &[Journey]| {
        let mut out = [0; LAYERS.len()];
        for (l, o) in out.iter_mut().enumerate() {
            *o = median(js.iter().map(|j| j.layer_us[l]).collect());
        }
        out
    };
    match base {
        Some(b) => match &b.rows {
            Some(rows) => (
                medians(&journeys(b, rows)),
                "the baseline's median time per journey in each layer (its --detailed rows)",
            ),
            None => {
                let mut out = [0; LAYERS.len()];
                for s in &run.steps {
                    let Some(l) = LAYERS.iter().position(|l| l.1 == s.service) else {
                        continue;
                    };
                    let bs = b.steps.iter().find(|x| x.name == s.name);
                    out[l] += bs
                        .and_then(|x| x.group.dist("service_time")?.quantile(0.5))
                        .unwrap_or(0);
                }
                let lag = b.summary.dist("dispatch_lag").and_then(|d| d.quantile(0.5));
                out[SYSTEM] = lag.unwrap_or(0) * run.steps.len() as u64;
                (
                    out,
                    "the sum of the baseline's median service time of each step in the layer (its \
                     histograms; it has no --detailed rows)",
                )
            }
        },
        None => (
            medians(own),
            "this run's own median time per journey in each layer (no baseline)",
        ),
    }
}

/// The share of the layer's calls that ended OK, against the bound; `None`
/// when it made no call.
fn grpc_health(g: &Group) -> Option<Health> {
    if g.requests == 0 {
        return None;
    }
    let value_pct = 100.0 * g.completed as f64 / g.requests as f64;
    Some(Health {
        metric: "grpc_success_rate",
        value_pct,
        min_pct: GRPC_SUCCESS_MIN_PCT,
        ok: value_pct >= GRPC_SUCCESS_MIN_PCT,
        not_ok_by_status: g.grpc_errors.clone(),
    })
}

/// The root-cause matrix of `run`, against `base` when given.
pub(crate) fn attribute(run: &Run, base: Option<&Run>, min: MinChange) -> Attribution {
    let mut layers: Vec<Layer> = Vec::new();
    for (name, service, metrics) in LAYERS {
        let (steps, group) = layer_group(run, service);
        let Some(group) = group else { continue };
        let diffs: Vec<MetricDiff> = match base.map(|b| (b, layer_group(b, service).1)) {
            Some((b, Some(bg))) => metrics
                .iter()
                .filter_map(|m| Metric::parse(m).ok())
                .map(|m| {
                    let r = Side {
                        group: &group,
                        duration_s: run.duration_s(),
                    };
                    let s = Side {
                        group: &bg,
                        duration_s: b.duration_s(),
                    };
                    compare(&m, r, s, min)
                })
                .filter(|d| d.verdict != "n/a")
                .collect(),
            _ => Vec::new(),
        };
        let worse = |d: &MetricDiff| {
            d.percent
                .map(|p| if d.higher_is_better { -p } else { p })
                .unwrap_or(f64::NEG_INFINITY)
        };
        let worst = diffs.iter().max_by(|a, b| worse(a).total_cmp(&worse(b)));
        let status = if base.is_none() || diffs.is_empty() {
            "no baseline"
        } else if diffs.iter().any(|d| d.verdict == "regressed") {
            "regressed"
        } else if diffs.iter().any(|d| d.verdict == "improved") {
            "improved"
        } else {
            "within noise"
        };
        layers.push(Layer {
            layer: name,
            steps,
            // The metric that decided the status, else the worst-moving.
            deviation_pct: diffs
                .iter()
                .filter(|d| d.verdict == status)
                .max_by(|a, b| worse(a).abs().total_cmp(&worse(b).abs()))
                .or(worst)
                .and_then(|d| d.percent),
            health: (service == "grpc").then(|| grpc_health(&group)).flatten(),
            metrics: diffs,
            status,
            confidence: None,
            worst: Vec::new(),
        });
    }
    let Some(rows) = &run.rows else {
        return Attribution {
            layers,
            slow_journeys: 0,
            reference: "",
            note: Some(
                "this run has no --detailed rows: the deviation is shown, but no confidence and no \
                 trace ids (run `sluice load --detailed` to have them)"
                    .to_owned(),
            ),
        };
    };
    let js = journeys(run, rows);
    let (refs, reference) = reference(run, base, &js);
    let cut = Dist::from_values(js.iter().map(|j| j.total_us)).quantile(SLOW_QUANTILE);
    let slow: Vec<&Journey> = js.iter().filter(|j| Some(j.total_us) >= cut).collect();
    let mut counts = [0usize; LAYERS.len()];
    let mut worst: [Vec<Worst>; LAYERS.len()] = Default::default();
    for j in &slow {
        let extra = |l: usize| j.layer_us[l] as f64 - refs[l] as f64;
        let Some(top) = (0..LAYERS.len()).max_by(|a, b| extra(*a).total_cmp(&extra(*b))) else {
            continue;
        };
        if extra(top) <= 0.0 {
            continue;
        }
        counts[top] += 1;
        let slowest = j
            .rows
            .iter()
            .filter(|r| top == SYSTEM || row_layer(run, r) == Some(top))
            .max_by_key(|r| {
                if top == SYSTEM {
                    r.sent_us.saturating_sub(r.intended_us)
                } else {
                    r.end_us.saturating_sub(r.sent_us)
                }
            });
        worst[top].push(Worst {
            journey: j.index,
            step: slowest
                .and_then(|r| run.steps.get(r.step))
                .map_or(String::new(), |s| s.name.clone()),
            trace_id: slowest.map_or(String::new(), |r| r.trace_id.clone()),
            layer_ms: j.layer_us[top] as f64 / 1000.0,
            extra_ms: extra(top) / 1000.0,
        });
    }
    for layer in &mut layers {
        let Some(l) = LAYERS.iter().position(|x| x.0 == layer.layer) else {
            continue;
        };
        layer.confidence = (!slow.is_empty()).then(|| counts[l] as f64 / slow.len() as f64);
        let mut w = std::mem::take(&mut worst[l]);
        w.sort_by(|a, b| b.extra_ms.total_cmp(&a.extra_ms));
        w.truncate(WORST);
        layer.worst = w;
    }
    Attribution {
        layers,
        slow_journeys: slow.len(),
        reference,
        note: None,
    }
}
