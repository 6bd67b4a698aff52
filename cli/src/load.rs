//! `sluice load SCENARIO`: a thin verb over `sluice_workload`'s load
//! engine: read and validate the scenario, make the schedule (this shard
//! of it), run it with the live display on stderr (`progress`) and the
//! pushes of `--report-to` (`report_to`), print the summary, write
//! `-o run.json`, and exit 99 when a threshold fails.

use crate::out;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sluice_cli::ctl::AdminToken;
use sluice_filters::{format_rfc3339, Artifact, ArtifactKind, ContentId};
use sluice_workload::{
    merge_runs, parse_duration, parse_sla, run_artifact, run_load, run_mixed, run_replay,
    summarize, write_atomically, Goodput, Lineage, Live, RunInfo, RunOptions, RunReport, Scenario,
    Shard, THRESHOLDS_FAILED,
};

use progress::Stderr;
pub(crate) use replay::ReplayArgs;
use report_to::ReportTo;
use snapshot::{RunMeta, Settled, Shape};

/// `sluice load SCENARIO` or `sluice load merge FILES -o run.json`.
#[derive(clap::Args, Clone, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct LoadArgs {
    #[command(subcommand)]
    command: Option<LoadCommand>,
    /// Optional so that `load merge` does not ask for a scenario: clap
    /// still requires `SCENARIO` once any of the run's arguments is given.
    #[command(flatten)]
    run: Option<RunArgs>,
    /// The control API's token, for `--report-to`.
    #[command(flatten)]
    token: AdminToken,
    /// Where the run's lineage artefacts go (set into [`RunArgs`] like the
    /// token, for the same reason).
    #[command(flatten)]
    lineage: crate::lineage::LineageDir,
}

#[derive(clap::Subcommand, Clone, Debug)]
enum LoadCommand {
    /// Merge the result files of the n shards of one run, exactly (counts
    /// summed, HDR histograms added, thresholds judged again). Exit 2 when
    /// they are not the shards of one run, 99 when a threshold fails.
    Merge {
        #[arg(required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        #[arg(short, long)]
        output: PathBuf,
    },
}

/// `sluice load`: open-loop load from a scenario, measured from the
/// intended send time.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct RunArgs {
    /// The scenario (YAML).
    scenario: PathBuf,
    /// Write the result (JSON: summaries with vLLM's names, HDR histograms).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Run the i-th (from 0) of n slices of the schedule: arrival k is in
    /// shard k mod n.
    #[arg(long, default_value = "0/1")]
    shard: Shard,
    /// Replaces the scenario's `workload.seed`.
    #[arg(long)]
    seed: Option<u64>,
    /// Run-wide thresholds with the names and values of `thresholds:`, e.g.
    /// `--sla ttft_p95=800ms,gap_p99=150ms,error_rate=1%`: added to the
    /// scenario's, replacing a run-wide one of the same gate. Exit 99 when
    /// one fails.
    #[arg(long)]
    sla: Option<String>,
    /// vLLM's goodput bounds in ms, e.g. `--goodput ttft:800 tpot:50 e2el:5000`.
    #[arg(long, num_args = 1..)]
    goodput: Vec<String>,
    /// A closed loop of N users instead of the schedule (to compare).
    #[arg(long)]
    closed: Option<usize>,
    /// Begin at this RFC 3339 time (so that the n pods of a sharded run
    /// start together); default now. At most a day ahead.
    #[arg(long, value_parser = start_at)]
    start_at: Option<i64>,
    /// Keep every request in the result file (`requests`).
    #[arg(long)]
    detailed: bool,
    /// How long requests in flight get after the last arrival; then they
    /// are reported as cut.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    drain: Duration,
    /// Push the live summary to this sluice control API every 2 s and at
    /// the end (`POST URL/v1/load-runs`, with `--token`), for the console.
    #[arg(long, value_parser = report_to::url)]
    report_to: Option<String>,
    /// `--token` (or `SLUICE_ADMIN_TOKEN`), set from [`LoadArgs`]: a
    /// flattened struct in `RunArgs` would keep clap from telling whether
    /// `run` was given.
    #[arg(skip)]
    token: AdminToken,
    /// `--lineage-dir`, set from [`LoadArgs`]; `None` writes no artefact
    /// (the run file still carries its lineage id).
    #[arg(skip)]
    lineage_dir: Option<PathBuf>,
    /// Replay N times as fast: every recorded gap divided by N (a replay
    /// scenario only; default 1).
    #[arg(long)]
    speed: Option<f64>,
    /// Replay from this offset into the trace (like 30s) or RFC 3339 time.
    #[arg(long)]
    from: Option<String>,
    /// Replay up to this offset (like 90s) or RFC 3339 time.
    #[arg(long)]
    to: Option<String>,
    /// Replay this share (0, 1] of the sessions, each whole (requests
    /// without a session one by one), drawn with the seed.
    #[arg(long)]
    sample: Option<f64>,
    /// Mix the scenarios saved in this `feedback.dir` into the run, each
    /// `weight` times (its weight decayed to now), as a step
    /// `feedback/<id>` of its own: into a replay's recording, or beside a
    /// synthetic scenario's journeys (open loop only).
    #[arg(long)]
    feedback: Option<PathBuf>,
}

impl RunArgs {
    /// Flat here: clap's `Option<RunArgs>` does not see a nested flatten.
    fn replay_args(&self) -> ReplayArgs {
        ReplayArgs {
            speed: self.speed,
            from: self.from.clone(),
            to: self.to.clone(),
            sample: self.sample,
        }
    }
}

pub(crate) fn run(args: LoadArgs) -> anyhow::Result<ExitCode> {
    if let Some(LoadCommand::Merge { files, output }) = &args.command {
        return merge(files, output, &args.lineage.lineage_dir);
    }
    let Some(args) = args.run.map(|run| RunArgs {
        token: args.token,
        lineage_dir: Some(args.lineage.lineage_dir),
        ..run
    }) else {
        eprintln!("sluice load: give a SCENARIO, or `merge FILES -o run.json`");
        return Ok(ExitCode::from(2));
    };
    match execute(&args, true)? {
        Outcome::Invalid(errors) => {
            for e in errors {
                eprintln!("{e}");
            }
            Ok(ExitCode::from(2))
        }
        Outcome::Ran(report) => {
            out(&render::render(&report));
            if let Some(path) = &args.output {
                eprintln!("wrote {}", path.display());
            }
            Ok(ExitCode::from(report.exit_code()))
        }
    }
}

pub(crate) enum Outcome {
    Invalid(Vec<String>),
    Ran(Box<RunReport>),
}

/// The run, and its file written when `-o` asks; `watch` adds the progress
/// lines and Ctrl-C (off in tests).
pub(crate) fn execute(args: &RunArgs, watch_it: bool) -> anyhow::Result<Outcome> {
    let goodput = match Goodput::parse(args.goodput.iter().map(String::as_str)) {
        Ok(g) => g,
        Err(e) => return Ok(Outcome::Invalid(vec![format!("--goodput: {e}")])),
    };
    let mut scenario = match Scenario::read(&args.scenario) {
        Ok(s) => s,
        Err(e) => {
            let file = args.scenario.display();
            return Ok(Outcome::Invalid(
                e.0.iter().map(|e| format!("{file}: {e}")).collect(),
            ));
        }
    };
    if let Some(seed) = args.seed {
        scenario.plan.seed = seed;
    }
    if let Some(sweep) = scenario.context_sweep.as_mut().filter(|c| c.to_auto) {
        let resolved = sluice_workload::model_context(&scenario.target)
            .and_then(|(tokens, source)| sweep.resolve(tokens, source).map(|()| source));
        match resolved {
            Ok(source) => eprintln!(
                "load: context_sweep.to: auto = {} tokens ({source})",
                sweep.to
            ),
            Err(e) => {
                let file = args.scenario.display();
                return Ok(Outcome::Invalid(vec![format!("{file}: {e}")]));
            }
        }
    }
    if let Some(text) = &args.sla {
        match parse_sla(text) {
            Ok(sla) => add_sla(&mut scenario, sla),
            Err(errors) => return Ok(Outcome::Invalid(errors)),
        }
    }
    let (mixed, beside) = match &args.feedback {
        Some(dir) => match crate::feedback::mix(&mut scenario, dir, args.closed) {
            Ok((m, beside)) => (m.runs, beside),
            Err(errors) => return Ok(Outcome::Invalid(errors)),
        },
        None => (Vec::new(), None),
    };
    let replaying = match replay::plan(&scenario, &args.scenario, &args.replay_args(), args.closed)
    {
        Ok(r) => r,
        Err(errors) => return Ok(Outcome::Invalid(errors)),
    };
    for w in scenario.warnings() {
        eprintln!("load: warning: {w}");
    }
    let whole = match (&replaying, &beside) {
        (Some(r), _) => r.replay.schedule.clone(),
        (None, Some(m)) => m.schedule.clone(),
        (None, None) => scenario.plan.schedule()?,
    };
    let schedule = whole.shard(args.shard);
    if let Some(at_us) = args.start_at {
        let wait = wait_until(at_us, unix_us());
        if !wait.is_zero() {
            eprintln!("load: starting in {:.1} s (--start-at)", wait.as_secs_f64());
            std::thread::sleep(wait);
        }
    }
    let now_us = unix_us();
    let run_id = format!("load-{:016x}", rand::random::<u64>());
    let options = RunOptions {
        closed: args.closed,
        drain: args.drain,
        run_id: run_id.clone(),
        threads: std::thread::available_parallelism().map_or(2, usize::from),
    };
    let live = Arc::new(Live::default());
    let done = AtomicBool::new(false);
    let shape = Shape::new(
        &scenario,
        &schedule.arrivals,
        schedule.span_us,
        args.closed.is_some(),
    );
    let meta = RunMeta {
        run_id: run_id.clone(),
        scenario: scenario.name.clone(),
        shard: args.shard.to_string(),
        mode: if args.closed.is_some() {
            "closed"
        } else {
            "open"
        },
        started_at: format_rfc3339(now_us),
    };
    let stderr = Stderr::new(watch_it, schedule.span_us);
    let (settle, settled) = std::sync::mpsc::channel();
    // Scoped: the display and the pusher read the schedule and the live
    // counters in place, and end before this does.
    let mut report = std::thread::scope(|s| -> anyhow::Result<RunReport> {
        let watcher = watch_it.then(|| s.spawn(|| progress::watch(&live, &done, &shape, &stderr)));
        let pusher = args.report_to.as_deref().map(|url| {
            let to = ReportTo {
                url,
                token: &args.token,
            };
            let (shape, live, meta, stderr) = (&shape, &*live, &meta, &stderr);
            s.spawn(move || report_to::push_until_settled(to, shape, live, meta, &settled, stderr))
        });
        let result = match (&replaying, &beside) {
            (Some(r), _) => run_replay(
                &scenario,
                &schedule,
                &r.replay.journeys,
                &options,
                live.clone(),
            ),
            (None, Some(m)) => run_mixed(&scenario, &schedule, m, &options, live.clone()),
            (None, None) => run_load(&scenario, &schedule, &options, live.clone()),
        };
        done.store(true, Ordering::Release);
        if let Some(w) = watcher {
            let _ = w.join();
        }
        let report = result.map_err(anyhow::Error::from).and_then(|output| {
            Ok(summarize(
                &scenario,
                &output,
                RunInfo {
                    run_id,
                    shard: args.shard.to_string(),
                    started_at: format_rfc3339(now_us),
                    lineage: Lineage::of(&scenario, &args.scenario)?,
                    goodput,
                    detailed: args.detailed,
                },
            ))
        });
        if let Ok(r) = &report {
            let _ = settle.send(Settled {
                thresholds: r.thresholds.clone(),
                passed: r.passed,
                interrupted: r.interrupted,
            });
        }
        drop(settle);
        if let Some(Ok(p)) = pusher.map(|p| p.join()) {
            if p.failed > 0 {
                stderr.say(&format!(
                    "load: --report-to: {} of {} pushes failed",
                    p.failed, p.made
                ));
            }
        }
        report
    })?;
    report.replay = replaying.map(|r| r.run);
    report.feedback = mixed;
    let made = identify(&mut report, args);
    if let Some(path) = &args.output {
        write_atomically(path, &serde_json::to_vec_pretty(&report)?)?;
    }
    if let Some(dir) = &args.lineage_dir {
        crate::lineage::keep("load", dir, &made);
    }
    Ok(Outcome::Ran(Box::new(report)))
}

/// Sets the run's lineage id and parents (the scenario, below its model
/// file, and the cluster versions that answered); the artefacts to keep.
/// A scenario (or model file) that cannot be read again is said and leaves
/// the run without an id.
fn identify(report: &mut RunReport, args: &RunArgs) -> Vec<sluice_filters::Artifact> {
    let from_model = report.lineage.from_model.as_deref();
    let mut made = match crate::lineage::scenario_nodes(&args.scenario, from_model) {
        Ok(made) => made,
        Err(e) => {
            eprintln!("load: warning: no lineage id: {e:#}");
            return Vec::new();
        }
    };
    let Some(scenario) = made.last().map(|s| s.id.clone()) else {
        return Vec::new();
    };
    // The saved scenarios mixed in are parents too, and kept beside the run.
    let feedback: Vec<_> = report.feedback.iter().map(|f| f.artifact.clone()).collect();
    let extra = feedback.iter().map(|a| a.id.clone()).collect();
    made.extend(feedback);
    let run = run_artifact(report, &scenario, extra)
        .with_attr("run_id", report.run_id.clone().into())
        .with_attr("started_at", report.started_at.clone().into())
        .with_attr("passed", report.passed.into());
    report.lineage.id = Some(run.id.clone());
    report.lineage.parents = run.parents.clone();
    made.push(run);
    made
}

/// Whether `text` is a scenario rather than a proxy config: it has a
/// top-level `scenario:` key (`sluice validate` reads both).
pub(crate) fn is_scenario(text: &str) -> bool {
    text.lines().any(|l| l.starts_with("scenario:"))
}

/// `sluice validate` of a scenario: a line saying what it holds, or every
/// error with its path.
pub(crate) fn validate(path: &Path) -> Result<String, Vec<String>> {
    let file = path.display();
    let s = Scenario::read(path).map_err(|e| {
        e.0.iter()
            .map(|e| format!("{file}: {e}"))
            .collect::<Vec<_>>()
    })?;
    if let Some(source) = &s.replay {
        let journeys = replay::plan(&s, path, &ReplayArgs::default(), None)?
            .map_or(0, |p| p.run.planned_journeys);
        let mut text = format!(
            "{file}: valid scenario `{}` (replay of {}: {} recorded requests in {journeys} \
             journeys, {} thresholds)",
            s.name,
            source.file,
            source.recording.requests.len(),
            s.thresholds.len()
        );
        for w in s.warnings() {
            text.push_str(&format!("\nwarning: {w}"));
        }
        return Ok(text);
    }
    let arrivals = s
        .plan
        .schedule()
        .map_err(|e| vec![format!("{file}: workload: {e}")])?
        .arrivals
        .len();
    let mut text = format!(
        "{file}: valid scenario `{}` ({} steps, {arrivals} arrivals, {} thresholds)",
        s.name,
        s.steps.len(),
        s.thresholds.len()
    );
    for w in s.warnings() {
        text.push_str(&format!("\nwarning: {w}"));
    }
    Ok(text)
}

/// `sluice load merge`.
fn merge(files: &[PathBuf], output: &Path, lineage_dir: &Path) -> anyhow::Result<ExitCode> {
    let mut runs = Vec::with_capacity(files.len());
    for f in files {
        let text = std::fs::read(f).map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?;
        let run: serde_json::Value = serde_json::from_slice(&text)
            .map_err(|e| anyhow::anyhow!("{}: not JSON: {e}", f.display()))?;
        runs.push(run);
    }
    let mut merged = match merge_runs(&runs) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(2));
        }
    };
    // The whole run sits below its shards' runs (when each has an id).
    let mut made = Vec::new();
    let shards: Option<Vec<ContentId>> = runs
        .iter()
        .map(|r| r.pointer("/lineage/id").and_then(|v| v.as_str()))
        .map(|id| id.and_then(|id| ContentId::parse(id).ok()))
        .collect();
    if let (Some(shards), Some(lineage)) = (shards, merged.get_mut("lineage")) {
        let label = runs[0]["scenario"].as_str().unwrap_or("merged").to_owned();
        let mut sorted = shards.clone();
        sorted.sort();
        let whole = Artifact::new(
            ArtifactKind::LoadRun,
            label,
            serde_json::json!({"merge_of": sorted}),
            shards,
        );
        lineage["id"] = serde_json::json!(whole.id);
        lineage["parents"] = serde_json::json!(whole.parents);
        made.push(whole);
    }
    write_atomically(output, &serde_json::to_vec_pretty(&merged)?)?;
    eprintln!("wrote {}", output.display());
    crate::lineage::keep("load merge", lineage_dir, &made);
    Ok(ExitCode::from(if merged["passed"] == true {
        0
    } else {
        THRESHOLDS_FAILED
    }))
}

/// The most `--start-at` may be ahead of now.
const MAX_START_AHEAD_US: i64 = 24 * 3600 * 1_000_000;

fn unix_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// `--start-at`: an RFC 3339 time, as µs since the epoch, at most a day ahead.
fn start_at(text: &str) -> Result<i64, String> {
    let at = sluice_filters::parse_wall_clock(text)?;
    if at - unix_us() > MAX_START_AHEAD_US {
        return Err(format!("`{text}` is more than a day ahead"));
    }
    Ok(at)
}

/// `--sla` over the scenario's run-wide thresholds: a gate given in both
/// takes the flag's bound (said on stderr), the others are added.
fn add_sla(scenario: &mut Scenario, sla: Vec<(sluice_filters::Gate, f64)>) {
    for (gate, bound) in sla {
        match scenario.thresholds.iter_mut().find(|(g, _)| *g == gate) {
            Some(t) => {
                eprintln!(
                    "load: --sla replaces the scenario's threshold {}",
                    gate.as_str()
                );
                t.1 = bound;
            }
            None => scenario.thresholds.push((gate, bound)),
        }
    }
}

/// How long until `at_us` (zero when it has passed: start now).
fn wait_until(at_us: i64, now_us: i64) -> Duration {
    Duration::from_micros(u64::try_from(at_us.saturating_sub(now_us)).unwrap_or(0))
}

mod progress;
mod render;
mod replay;
mod report_to;
mod snapshot;
#[cfg(test)]
mod tests;
