//! What `sluice report` reads: a `sluice load` result file or a capacity
//! file, as JSON, checked field by field so that a bad file is named where
//! it is bad. The HDR histograms are decoded to their recorded buckets.

use std::collections::BTreeMap;

use base64::Engine as _;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::Value;

/// The measures whose histograms a result file carries (`ttft_us`, …):
/// the load summary's own list.
pub use crate::load::MEASURES as HIST_MEASURES;

/// A distribution as an HDR histogram recorded it: each bucket's highest
/// equivalent value (µs) with its count, ascending.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Dist {
    pub buckets: Vec<(u64, u64)>,
    pub total: u64,
}

impl Dist {
    pub fn from_values(values: impl IntoIterator<Item = u64>) -> Dist {
        let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
        for v in values {
            *counts.entry(v).or_insert(0) += 1;
        }
        let total = counts.values().sum();
        Dist {
            buckets: counts.into_iter().collect(),
            total,
        }
    }

    fn from_histogram(h: &Histogram<u64>) -> Dist {
        let buckets: Vec<(u64, u64)> = h
            .iter_recorded()
            .map(|v| {
                (
                    h.highest_equivalent(v.value_iterated_to()),
                    v.count_at_value(),
                )
            })
            .collect();
        Dist {
            total: buckets.iter().map(|b| b.1).sum(),
            buckets,
        }
    }

    /// The `q` quantile the way HdrHistogram reads it: the first bucket
    /// whose running count reaches `round(q·n)` (at least 1).
    pub fn quantile(&self, q: f64) -> Option<u64> {
        quantile_of(&self.buckets, self.total, q)
    }

    pub fn mean(&self) -> Option<f64> {
        (self.total > 0).then(|| {
            self.buckets
                .iter()
                .map(|(v, c)| *v as f64 * *c as f64)
                .sum::<f64>()
                / self.total as f64
        })
    }
}

/// The quantile of buckets with the given counts (see [`Dist::quantile`]).
pub(crate) fn quantile_of(buckets: &[(u64, u64)], total: u64, q: f64) -> Option<u64> {
    if total == 0 {
        return None;
    }
    let target = ((q * total as f64 + 0.5) as u64).clamp(1, total);
    let mut seen = 0;
    for (v, c) in buckets {
        seen += c;
        if seen >= target {
            return Some(*v);
        }
    }
    buckets.last().map(|b| b.0)
}

/// One group's summary (the run, a step, a stage).
#[derive(Clone, Debug, Default)]
pub struct Group {
    pub requests: u64,
    pub completed: u64,
    pub failed: u64,
    pub rate_limited: u64,
    pub timeouts: u64,
    pub queued: u64,
    pub late: u64,
    pub output_tokens: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// Failed gRPC calls by `grpc-status` (`"14"`), from grpc steps.
    pub grpc_errors: BTreeMap<String, u64>,
    /// vLLM's names: `request_throughput`, `p99_ttft_ms`, `duration`, …
    pub metrics: BTreeMap<String, f64>,
    /// By measure (`ttft`), decoded.
    pub dists: BTreeMap<String, Dist>,
}

impl Group {
    pub fn metric(&self, name: &str) -> Option<f64> {
        self.metrics.get(name).copied()
    }

    pub fn dist(&self, measure: &str) -> Option<&Dist> {
        self.dists.get(measure).filter(|d| d.total > 0)
    }

    /// Failed (429s apart) in percent of the requests.
    pub fn error_rate_pct(&self) -> Option<f64> {
        (self.requests > 0).then(|| 100.0 * self.failed as f64 / self.requests as f64)
    }
}

/// A step's summary with its name and service.
#[derive(Clone, Debug)]
pub struct StepGroup {
    pub name: String,
    pub service: String,
    pub group: Group,
}

/// One `--detailed` request row, the fields the report reads.
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub struct Row {
    pub step: usize,
    #[serde(default)]
    pub trace_id: String,
    pub index: u64,
    pub stage: usize,
    #[serde(default)]
    pub warmup: bool,
    pub intended_us: u64,
    pub sent_us: u64,
    #[serde(default)]
    pub first_content_us: Option<u64>,
    pub end_us: u64,
    #[serde(default)]
    pub failure: Option<String>,
    #[serde(default)]
    pub output_tokens: Option<u64>,
}

/// A load run's result file, read.
#[derive(Clone, Debug, Default)]
pub struct Run {
    pub scenario: String,
    pub mode: String,
    pub run_id: String,
    pub seed: Option<u64>,
    pub shard: String,
    pub started_at: String,
    pub scenario_sha256: String,
    pub target: String,
    pub sluice_version: String,
    pub from_model: Option<String>,
    /// The run's lineage id (`lineage.id`; absent in files from before it).
    pub lineage_id: Option<String>,
    /// Who answered (the result's `seen`; empty in files from before it).
    pub seen: Vec<crate::load::Seen>,
    pub summary: Group,
    pub steps: Vec<StepGroup>,
    pub stages: Vec<(u64, Group)>,
    pub thresholds: Vec<Value>,
    pub passed: bool,
    pub interrupted: bool,
    pub journeys: u64,
    /// `--detailed` rows, warm-up left out; `None` without them.
    pub rows: Option<Vec<Row>>,
    /// The fit of the scenario's `from_model:` (`arrival_fit`); `None` in
    /// other runs and in files from before it.
    pub arrival_fit: Option<super::AttachedFit>,
    /// The scenario's `context_sweep` result; `None` in other runs.
    pub context_sweep: Option<crate::load::SweepResult>,
}

impl Run {
    pub fn duration_s(&self) -> f64 {
        self.summary.metric("duration").unwrap_or(0.0)
    }
}

/// Reads a result file's text: `Err` says where it is bad.
pub fn parse_json(text: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(text).map_err(|e| match e.classify() {
        serde_json::error::Category::Eof => format!(
            "the file ends early at line {} column {}: truncated (was the run stopped while \
             writing it?)",
            e.line(),
            e.column()
        ),
        _ => format!("not JSON: {e}"),
    })
}

fn text(v: &Value, at: &str, key: &str) -> Result<String, String> {
    match v.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(a)) => Ok(a
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(",")),
        Some(other) => Err(format!("{at}{key}: expected a string, found {other}")),
        None => Err(format!("{at}{key}: missing")),
    }
}

fn count(v: &Value, at: &str, key: &str) -> Result<u64, String> {
    match v.get(key) {
        Some(n) => n
            .as_u64()
            .ok_or_else(|| format!("{at}{key}: expected a count, found {n}")),
        None => Err(format!("{at}{key}: missing")),
    }
}

/// One group at `at` (`summary.`, `steps[1].`).
pub(crate) fn group(v: &Value, at: &str) -> Result<Group, String> {
    let optional = |key: &str| v.get(key).and_then(Value::as_u64).unwrap_or(0);
    let mut g = Group {
        requests: count(v, at, "requests")?,
        completed: count(v, at, "completed")?,
        failed: count(v, at, "failed")?,
        rate_limited: optional("rate_limited"),
        timeouts: optional("timeouts"),
        queued: optional("queued"),
        late: optional("late"),
        output_tokens: optional("total_output_tokens"),
        cache_hits: optional("cache_hits"),
        cache_misses: optional("cache_misses"),
        ..Group::default()
    };
    let map = v
        .as_object()
        .ok_or_else(|| format!("{at}: expected an object"))?;
    for (k, x) in map {
        if let Value::Number(n) = x {
            g.metrics.insert(k.clone(), n.as_f64().unwrap_or(f64::NAN));
        }
    }
    if let Some(errors) = v.get("grpc_errors") {
        let errors = errors
            .as_object()
            .ok_or_else(|| format!("{at}grpc_errors: expected an object"))?;
        for (code, n) in errors {
            let n = n
                .as_u64()
                .ok_or_else(|| format!("{at}grpc_errors.{code}: expected a count"))?;
            g.grpc_errors.insert(code.clone(), n);
        }
    }
    if let Some(hists) = v.get("histograms") {
        let hists = hists
            .as_object()
            .ok_or_else(|| format!("{at}histograms: expected an object"))?;
        for (name, text) in hists {
            let Some(measure) = name.strip_suffix("_us") else {
                continue;
            };
            let where_ = format!("{at}histograms.{name}");
            let bytes = text
                .as_str()
                .and_then(|t| base64::engine::general_purpose::STANDARD.decode(t).ok())
                .ok_or_else(|| format!("{where_}: not base64"))?;
            let h: Histogram<u64> = Deserializer::new()
                .deserialize(&mut bytes.as_slice())
                .map_err(|e| format!("{where_}: not an HDR histogram (V2): {e:?}"))?;
            g.dists.insert(measure.to_owned(), Dist::from_histogram(&h));
        }
    }
    Ok(g)
}

/// A `sluice load` result, checked.
pub fn read_run(v: &Value) -> Result<Run, String> {
    if !v.is_object() {
        return Err("expected a JSON object (a `sluice load` result)".to_owned());
    }
    let lineage = v.get("lineage").ok_or("lineage: missing")?;
    let summary = group(v.get("summary").ok_or("summary: missing")?, "summary.")?;
    let mut steps = Vec::new();
    for (i, s) in list(v, "steps")?.iter().enumerate() {
        let at = format!("steps[{i}].");
        steps.push(StepGroup {
            name: text(s, &at, "name")?,
            service: text(s, &at, "service")?,
            group: group(s, &at)?,
        });
    }
    let mut stages = Vec::new();
    for (i, s) in list(v, "stages")?.iter().enumerate() {
        let at = format!("stages[{i}].");
        stages.push((count(s, &at, "stage")?, group(s, &at)?));
    }
    let rows = match v.get("requests") {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => {
            let mut rows = Vec::with_capacity(a.len());
            for (i, r) in a.iter().enumerate() {
                let row: Row =
                    serde_json::from_value(r.clone()).map_err(|e| format!("requests[{i}]: {e}"))?;
                if !row.warmup {
                    rows.push(row);
                }
            }
            Some(rows)
        }
        Some(other) => return Err(format!("requests: expected a list, found {other}")),
    };
    Ok(Run {
        scenario: text(v, "", "scenario")?,
        mode: text(v, "", "mode").unwrap_or_else(|_| "open".to_owned()),
        run_id: text(v, "", "run_id").unwrap_or_default(),
        seed: v.get("seed").and_then(Value::as_u64),
        shard: text(v, "", "shard").unwrap_or_default(),
        started_at: text(v, "", "started_at")?,
        scenario_sha256: text(lineage, "lineage.", "scenario_sha256")?,
        target: text(lineage, "lineage.", "target")?,
        sluice_version: text(lineage, "lineage.", "sluice_version")?,
        from_model: lineage
            .get("from_model")
            .and_then(Value::as_str)
            .map(str::to_owned),
        lineage_id: lineage.get("id").and_then(Value::as_str).map(str::to_owned),
        seen: match v.get("seen") {
            None | Some(Value::Null) => Vec::new(),
            Some(s) => serde_json::from_value(s.clone()).map_err(|e| format!("seen: {e}"))?,
        },
        summary,
        steps,
        stages,
        thresholds: v
            .get("thresholds")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        passed: v.get("passed").and_then(Value::as_bool).unwrap_or(true),
        interrupted: v
            .get("interrupted")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        journeys: v
            .pointer("/dispatch/journeys")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        rows,
        arrival_fit: match v.get("arrival_fit") {
            None | Some(Value::Null) => None,
            Some(f) => Some(super::attach::read_arrival_fit(f, "arrival_fit.")?),
        },
        context_sweep: match v.get("context_sweep") {
            None | Some(Value::Null) => None,
            Some(c) => {
                Some(serde_json::from_value(c.clone()).map_err(|e| format!("context_sweep: {e}"))?)
            }
        },
    })
}

fn list<'a>(v: &'a Value, key: &str) -> Result<&'a [Value], String> {
    match v.get(key) {
        None => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(other) => Err(format!("{key}: expected a list, found {other}")),
    }
}
