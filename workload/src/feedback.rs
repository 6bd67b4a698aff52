//! Feedback scenarios read back: the directories the control plane saves
//! under `feedback.dir` when a rollout breaches or a fault experiment
//! halts (`manifest.json` and `trace.jsonl`, schemas in
//! `sluice_filters::feedback`), their weights decayed to now, the table of
//! `sluice feedback list`, and the mix of `sluice load --feedback DIR`.
//!
//! **The mix.** A scenario's weight is how many times its recorded window
//! is replayed: weight 3 sends its requests three times, one copy after
//! the other (one second apart), at their recorded gaps; the fraction of a
//! weight (2.4 → 0.4) sends that share of its sessions once more (each
//! request without a session counted alone), drawn from the run's seed.
//! So each saved scenario sends about `weight × its recorded requests`,
//! in proportion to its weight, and a scenario whose weight decayed near 0
//! sends close to nothing. In a replay the copies start with its first
//! request and join its recording; in a synthetic scenario they start at
//! the run's start and are sent beside its journeys (see
//! [`crate::Mixed`]). Each scenario's requests are measured as a step of
//! their own, `feedback/<id>`, beside the scenario's steps, so the result
//! shows each path that broke.
//!
//! Pure but for the directory read: the time of "now" is passed in, read
//! by [`FeedbackClock`] on tokio's clock.

use std::path::Path;

use serde::Serialize;
use sluice_filters::{FeedbackManifest, TraceLine, FEEDBACK_MANIFEST};

use crate::load::{recorded_request, recorded_step, seeded_unit, Recorded, Recording, Scenario};

/// Between the copies of one scenario's window.
const COPY_GAP_US: u64 = 1_000_000;
/// The prefix of a mixed-in scenario's step name.
pub const FEEDBACK_STEP_PREFIX: &str = "feedback/";

/// One saved scenario, read.
#[derive(Clone, Debug)]
pub struct Saved {
    /// Its directory's name (the manifest's id, or `ID-2` for a second
    /// scenario of the same inputs).
    pub name: String,
    pub manifest: FeedbackManifest,
    /// The trace's requests, in file order.
    pub lines: Vec<TraceLine>,
}

/// Every scenario under `dir`, oldest first (then by name). Hidden entries
/// (a scenario being written is `.ID.tmp`) and files are skipped; a
/// directory without a readable manifest or trace is an error naming the
/// file, and where in it.
pub fn read_feedback_dir(dir: &Path) -> Result<Vec<Saved>, Vec<String>> {
    let entries = std::fs::read_dir(dir).map_err(|e| vec![format!("{}: {e}", dir.display())])?;
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    let mut saved = Vec::new();
    let mut errors = Vec::new();
    for name in names {
        match read_one(&dir.join(&name), name) {
            Ok(s) => saved.push(s),
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    saved.sort_by(|a, b| {
        (a.manifest.created_us(), &a.name).cmp(&(b.manifest.created_us(), &b.name))
    });
    Ok(saved)
}

fn read_one(path: &Path, name: String) -> Result<Saved, String> {
    let manifest_path = path.join(FEEDBACK_MANIFEST);
    let text = std::fs::read_to_string(&manifest_path)
        .map_err(|e| format!("{}: {e}", manifest_path.display()))?;
    let manifest =
        FeedbackManifest::parse(&text).map_err(|e| format!("{}: {e}", manifest_path.display()))?;
    let trace_path = path.join(&manifest.trace);
    let text = std::fs::read_to_string(&trace_path)
        .map_err(|e| format!("{}: {e}", trace_path.display()))?;
    let lines = sluice_filters::parse_lines(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", trace_path.display()))?;
    Ok(Saved {
        name,
        manifest,
        lines,
    })
}

/// "Now" for the weights: a wall-clock reading taken once, moved on by
/// tokio's clock, so that a test with a paused clock sees the weights
/// decay as it advances time.
#[derive(Clone, Copy, Debug)]
pub struct FeedbackClock {
    wall_us: i64,
    at: tokio::time::Instant,
}

impl FeedbackClock {
    /// `wall_us`: the wall clock now, µs since the epoch.
    pub fn new(wall_us: i64) -> FeedbackClock {
        FeedbackClock {
            wall_us,
            at: tokio::time::Instant::now(),
        }
    }

    pub fn now_us(&self) -> i64 {
        let moved = i64::try_from(self.at.elapsed().as_micros()).unwrap_or(i64::MAX);
        self.wall_us.saturating_add(moved)
    }
}

/// One line of `sluice feedback list`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FeedbackRow {
    pub id: String,
    pub kind: &'static str,
    pub cause: &'static str,
    pub gate: String,
    pub value: Option<f64>,
    pub bound: f64,
    pub unit: String,
    pub route: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
    pub cluster: Option<String>,
    pub version: Option<String>,
    pub requests: u64,
    pub error_rate: f64,
    pub created: String,
    pub initial_weight: f64,
    pub weight_now: f64,
    pub half_life: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The rows of `saved` with their weights at `now_us`.
pub fn feedback_rows(saved: &[Saved], now_us: i64) -> Vec<FeedbackRow> {
    saved
        .iter()
        .map(|s| {
            let m = &s.manifest;
            FeedbackRow {
                id: s.name.clone(),
                kind: m.trigger.kind.as_str(),
                cause: m.trigger.cause.as_str(),
                gate: m.trigger.gate.clone(),
                value: m.trigger.value,
                bound: m.trigger.bound,
                unit: m.trigger.unit.clone(),
                route: m.route.clone(),
                rollout: m.rollout.clone(),
                fault: m.fault.clone(),
                cluster: m.cluster.clone(),
                version: m.version.clone(),
                requests: m.requests,
                error_rate: m.error_rate,
                created: m.created.clone(),
                initial_weight: m.initial_weight,
                weight_now: round(m.weight_at(now_us), 3),
                half_life: m.half_life.clone(),
                notes: m.notes.clone(),
            }
        })
        .collect()
}

fn round(v: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (v * scale).round() / scale
}

/// `error_rate 50% > 1%`, `halt_if.error_rate 40% > 10%`.
fn trigger_text(row: &FeedbackRow) -> String {
    let show = |v: f64| match row.unit.as_str() {
        "ms" | "%" => format!("{}{}", round(v, 3), row.unit),
        "usd" => format!("${}", round(v, 6)),
        _ => round(v, 3).to_string(),
    };
    let value = row.value.map_or_else(|| "n/a".to_owned(), show);
    format!("{} {value} > {}", row.gate, show(row.bound))
}

/// The table `sluice feedback list` prints: one scenario a line.
pub fn feedback_table(rows: &[FeedbackRow]) -> String {
    if rows.is_empty() {
        return "no feedback scenarios".to_owned();
    }
    let head = [
        "ID",
        "TRIGGER",
        "CAUSE",
        "ROUTE",
        "CLUSTER",
        "REQUESTS",
        "CREATED",
        "WEIGHT",
        "NOW",
        "HALF-LIFE",
    ];
    let mut table: Vec<Vec<String>> = vec![head.iter().map(|h| (*h).to_owned()).collect()];
    for r in rows {
        let cluster = match (&r.cluster, &r.version) {
            (Some(c), Some(v)) => format!("{c}@{v}"),
            (Some(c), None) => c.clone(),
            (None, _) => "-".to_owned(),
        };
        table.push(vec![
            r.id.clone(),
            format!("{}: {}", r.kind, trigger_text(r)),
            r.cause.to_owned(),
            r.route.clone(),
            cluster,
            r.requests.to_string(),
            r.created.get(..19).unwrap_or(&r.created).replace('T', " "),
            format!("{:.2}", r.initial_weight),
            format!("{:.2}", r.weight_now),
            r.half_life.clone(),
        ]);
    }
    let widths: Vec<usize> = (0..head.len())
        .map(|c| {
            table
                .iter()
                .map(|row| row[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    table
        .iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:<w$}"))
                .collect();
            cells.join("  ").trim_end().to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What one scenario added to a run (`run.json`'s `feedback`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FeedbackRun {
    pub id: String,
    /// The saved scenario's lineage artefact: the run's parent, kept with
    /// the run's own artefacts so that `sluice lineage` walks from a report
    /// through the run to the rollout event that broke.
    #[serde(skip)]
    pub artifact: sluice_filters::Artifact,
    /// The step its requests are measured as.
    pub step: String,
    pub trigger: String,
    pub route: String,
    /// Its weight at the run's start.
    pub weight: f64,
    pub recorded_requests: usize,
    /// Requests of it mixed into the recording.
    pub mixed_requests: usize,
}

/// What `--feedback` mixed in: a line per saved scenario and, for a
/// synthetic scenario, the requests to send beside its journeys.
#[derive(Clone, Debug, PartialEq)]
pub struct FeedbackMix {
    pub runs: Vec<FeedbackRun>,
    /// For a synthetic scenario, the saved requests from the run's start
    /// (planned beside its journeys by [`crate::Mixed::new`]); `None` for a
    /// replay (they went into its recording) or when none is sent.
    pub beside: Option<Recording>,
}

/// Mixes `saved` into `scenario` at `now_us`, each in proportion to its
/// weight then (see the module's doc), with a step `feedback/<id>` per
/// scenario that sends anything. A replay gets the requests in its
/// recording; a synthetic scenario gets them back as
/// [`FeedbackMix::beside`], its steps after its own for measurement only.
pub fn mix_feedback(
    scenario: &mut Scenario,
    saved: &[Saved],
    now_us: i64,
) -> Result<FeedbackMix, String> {
    let seed = scenario.plan.seed;
    let (start, base_step) = match &scenario.replay {
        Some(source) => {
            let Some(step) = scenario.steps.first().cloned() else {
                return Err("--feedback: the replay scenario has no step".to_owned());
            };
            let first = source.recording.requests.first();
            (first.map_or(0, |r| r.arrival_us), step)
        }
        // From the run's start, as the step a replay has.
        None => (0, recorded_step()),
    };
    let mut runs = Vec::new();
    let mut requests = Vec::new();
    for s in saved {
        let weight = s.manifest.weight_at(now_us);
        let step = scenario.steps.len();
        let mixed = copies(s, weight, seed, start, step);
        let name = format!("{FEEDBACK_STEP_PREFIX}{}", s.name);
        let row = &feedback_rows(std::slice::from_ref(s), now_us)[0];
        runs.push(FeedbackRun {
            id: s.name.clone(),
            artifact: s.manifest.artifact.clone(),
            step: name.clone(),
            trigger: format!("{}: {}", row.kind, trigger_text(row)),
            route: s.manifest.route.clone(),
            weight: round(weight, 3),
            recorded_requests: s.lines.len(),
            mixed_requests: mixed.len(),
        });
        if mixed.is_empty() {
            continue;
        }
        let mut own = base_step.clone();
        own.name = name;
        // `replay_step`'s thresholds judge the trace's own requests; a
        // feedback step takes its timeout and request settings alone.
        own.thresholds.clear();
        scenario.steps.push(own);
        requests.extend(mixed);
    }
    let beside = match scenario.replay.as_mut() {
        Some(source) => {
            source.recording.requests.extend(requests);
            // Stable: at a tie the trace's own request goes first.
            source.recording.requests.sort_by_key(|r| r.arrival_us);
            None
        }
        None => {
            requests.sort_by_key(|r| r.arrival_us);
            (!requests.is_empty()).then(|| Recording {
                requests,
                warnings: Vec::new(),
            })
        }
    };
    Ok(FeedbackMix { runs, beside })
}

/// `weight` copies of the scenario's requests from `start`, as step `step`.
fn copies(s: &Saved, weight: f64, seed: u64, start: u64, step: usize) -> Vec<Recorded> {
    if s.lines.is_empty() || !(weight.is_finite() && weight > 0.0) {
        return Vec::new();
    }
    let first = s.lines.iter().map(|l| l.arrival_us).min().unwrap_or(0);
    let last = s.lines.iter().map(|l| l.arrival_us).max().unwrap_or(0);
    let span = last - first + COPY_GAP_US;
    let whole = weight.floor() as u64;
    let share = weight - weight.floor();
    let mut out = Vec::new();
    for copy in 0..=whole {
        let last_partial = copy == whole;
        if last_partial && share <= 0.0 {
            break;
        }
        for (k, line) in s.lines.iter().enumerate() {
            let key = match &line.session_id {
                Some(session) => format!("{}/s{session}", s.name),
                None => format!("{}/r{k}", s.name),
            };
            if last_partial && seeded_unit(seed, &key) >= share {
                continue;
            }
            let mut r = recorded_request(line.clone());
            r.arrival_us = start + copy * span + (line.arrival_us - first);
            // The wall clock is the incident's, not the run's: a window by
            // wall clock (`--from`) is the replayed trace's.
            r.wall_us = None;
            r.session = line
                .session_id
                .as_ref()
                .map(|session| format!("{FEEDBACK_STEP_PREFIX}{}/{copy}/{session}", s.name));
            r.step = step;
            out.push(r);
        }
    }
    out
}

#[cfg(test)]
mod tests;
