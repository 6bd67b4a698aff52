//! `sluice capacity SCENARIO --sla …`: a thin verb over
//! `sluice_workload`'s capacity search. It reads the scenario and the
//! flags, runs the stages with a line each on stderr, prints the stages
//! and the recommendation, writes `-o capacity.json`, and with
//! `--into-rollout` prints the rollout gates the result implies. Exit 0
//! with a rate found, 99 when no probed rate held every SLA, 2 on bad
//! input.

use crate::out;
use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sluice_filters::format_rfc3339;
use sluice_filters::ContentId;
use sluice_workload::{
    capacity_artifact, capacity_search, format_duration, parse_duration, parse_sla,
    write_atomically, Bounds, CapacityOptions, CapacityReport, Lineage, Observer, Scenario,
    SearchRules, Weights, DEFAULT_KNEE_BOUND, DEFAULT_SLOPE_BOUND_MS, THRESHOLDS_FAILED,
};

mod render;

/// The name of the cost bound in `--sla` (not a rollout gate: the search
/// prices throughput by the scenario's `cost:`).
const COST_BOUND: &str = "cost_per_1k_max";

/// `sluice capacity`: the highest rate within the SLAs, the throughput
/// knee, the P99 cost of a token, the cost of 1k tokens, and a
/// recommended rate.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct CapacityArgs {
    /// The scenario (YAML), as for `sluice load`.
    scenario: PathBuf,
    /// The hard SLAs, with the rollout gates' names, e.g.
    /// `ttft_p95=800ms,gap_p99=150ms,error_rate=1%`, and optionally
    /// `cost_per_1k_max=0.012` (USD, by the scenario's `cost:`).
    #[arg(long)]
    sla: String,
    /// The whole search's time, stages and drains together.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    budget: Duration,
    /// The measured length of each probe (after the scenario's warm-up).
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    stage: Duration,
    /// The length of the confirmation stage at the rate found.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    confirm: Duration,
    /// The first rate probed (arrivals a second); default the scenario's
    /// first rate.
    #[arg(long)]
    start: Option<f64>,
    /// Never probe above this rate.
    #[arg(long, default_value_t = 100_000.0)]
    max_rate: f64,
    /// The search ends when the bracket is narrower than this share.
    #[arg(long, default_value = "5%", value_parser = share)]
    tolerance: f64,
    /// The joint decision's weights: latency_critical, generation, or
    /// `p99=0.5,knee=0.3,cost=0.2`.
    #[arg(long, default_value = "latency_critical", value_parser = Weights::parse)]
    profile: Weights,
    /// The bound on the P99 sensitivity's growth under load, ms per token.
    #[arg(long, default_value_t = DEFAULT_SLOPE_BOUND_MS)]
    slope_bound: f64,
    /// The bound on the normalised second derivative of the knee.
    #[arg(long, default_value_t = DEFAULT_KNEE_BOUND, allow_negative_numbers = true)]
    knee_bound: f64,
    /// How long a stage's requests in flight get after its last arrival.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    drain: Duration,
    /// Replaces the scenario's `workload.seed`.
    #[arg(long)]
    seed: Option<u64>,
    /// Write the result (JSON: every stage with its load result, the
    /// knee, the slopes, the cost, the recommendation).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Print the rollout `gates:` block that this capacity implies.
    #[arg(long)]
    into_rollout: bool,
    #[command(flatten)]
    lineage: crate::lineage::LineageDir,
}

pub(crate) fn run(args: CapacityArgs) -> anyhow::Result<ExitCode> {
    let file = args.scenario.display().to_string();
    let mut scenario = match Scenario::read(&args.scenario) {
        Ok(s) => s,
        Err(e) => return Ok(invalid(e.0.iter().map(|e| format!("{file}: {e}")))),
    };
    if let Some(seed) = args.seed {
        scenario.plan.seed = seed;
    }
    let (sla, cost_max) = match split_sla(&args.sla) {
        Ok(v) => v,
        Err(errors) => return Ok(invalid(errors)),
    };
    if cost_max.is_some() && scenario.cost.is_none() {
        return Ok(invalid([format!(
            "--sla: {COST_BOUND}: the scenario has no `cost:` price table to price tokens by"
        )]));
    }
    let start = args
        .start
        .or_else(|| scenario.plan.segments.first().map(|s| s.from.max(s.to)))
        .filter(|r| *r > 0.0)
        .unwrap_or(1.0);
    let now_us = unix_us();
    let opts = CapacityOptions {
        sla,
        weights: args.profile,
        bounds: Bounds {
            p99_excess_ms_per_token: args.slope_bound,
            cost_per_1k_max: cost_max,
        },
        knee_bound: args.knee_bound,
        stage: args.stage,
        confirm: args.confirm,
        budget: args.budget,
        rules: SearchRules {
            start,
            min_rate: start / 1024.0,
            max_rate: args.max_rate,
            tolerance: args.tolerance,
            max_confirms: 2,
        },
        drain: args.drain,
        threads: std::thread::available_parallelism().map_or(2, usize::from),
        run_id: format!("capacity-{:016x}", rand::random::<u64>()),
        started_at: format_rfc3339(now_us),
        lineage: Lineage::of(&scenario, &args.scenario)?,
    };
    let interrupt = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let limit = args.budget + Duration::from_secs(3600);
    let result = std::thread::scope(|scope| {
        let ctrl_c = scope.spawn(|| on_ctrl_c(&interrupt, &done, limit));
        let terminal = std::io::stderr().is_terminal();
        let clear = if terminal { render::CLEAR } else { "" };
        let mut progress = render::Progress::new(terminal);
        let r = capacity_search(
            &scenario,
            &opts,
            &interrupt,
            Observer {
                progress: &mut |p| progress.show(p),
                stage: &mut |so_far| eprintln!("{clear}{}", render::stage_line(so_far)),
            },
        );
        done.store(true, Ordering::Release);
        let _ = ctrl_c.join();
        r
    });
    let mut report = result?;
    let made = identify(&mut report, &args, &scenario);
    if let Some(path) = &args.output {
        write_atomically(path, &serde_json::to_vec_pretty(&report)?)?;
        eprintln!("wrote {}", path.display());
    }
    crate::lineage::keep("capacity", &args.lineage.lineage_dir, &made);
    out(&render::summary(&report));
    if args.into_rollout {
        out(&render::rollout_gates(&report));
    }
    Ok(ExitCode::from(if report.max_rate.is_some() {
        0
    } else {
        THRESHOLDS_FAILED
    }))
}

/// Sets the capacity run's lineage id: below the scenario (and its model
/// file) and the cluster versions any stage's answers named; its inputs
/// are the search asked for, never what it found. The artefacts to keep.
fn identify(
    report: &mut CapacityReport,
    args: &CapacityArgs,
    scenario: &Scenario,
) -> Vec<sluice_filters::Artifact> {
    let from_model = scenario.from_model.as_deref();
    let mut made = match crate::lineage::scenario_nodes(&args.scenario, from_model) {
        Ok(made) => made,
        Err(e) => {
            eprintln!("capacity: warning: no lineage id: {e:#}");
            return Vec::new();
        }
    };
    let Some(scenario_id) = made.last().map(|s| s.id.clone()) else {
        return Vec::new();
    };
    let answered: Vec<ContentId> = report
        .stages
        .iter()
        .flat_map(|s| &s.run.seen)
        .filter_map(|s| s.lineage_id.as_deref())
        .filter_map(|id| ContentId::parse(id).ok())
        .collect();
    let search = serde_json::json!({
        "sla": report.sla,
        "weights": report.weights,
        "bounds": report.bounds,
        "knee_bound": args.knee_bound,
        "stage": format_duration(args.stage),
        "confirm": format_duration(args.confirm),
        "budget": format_duration(args.budget),
        "drain": format_duration(args.drain),
        "start": args.start,
        "max_rate": args.max_rate,
        "tolerance": args.tolerance,
    });
    let run = capacity_artifact(
        &report.scenario,
        &scenario_id,
        &report.lineage.target,
        scenario.plan.seed,
        search,
        answered,
    )
    .with_attr("run_id", report.run_id.clone().into())
    .with_attr("started_at", report.started_at.clone().into())
    .with_attr("max_rate", serde_json::json!(report.max_rate));
    report.lineage.id = Some(run.id.clone());
    report.lineage.parents = run.parents.clone();
    made.push(run);
    made
}

/// The hard SLAs by gate, and the cost bound.
type Slas = (Vec<(sluice_filters::Gate, f64)>, Option<f64>);

/// `--sla` less `cost_per_1k_max`, read as `sluice load --sla` reads it;
/// and the cost bound.
fn split_sla(text: &str) -> Result<Slas, Vec<String>> {
    let mut rest = Vec::new();
    let mut cost = None;
    let mut errors = Vec::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match item.split_once('=') {
            Some((name, value)) if name.trim() == COST_BOUND => {
                let value = value.trim().trim_start_matches('$');
                match value.parse::<f64>() {
                    Ok(v) if v.is_finite() && v > 0.0 => cost = Some(v),
                    _ => errors.push(format!(
                        "--sla: {COST_BOUND}: `{value}` is not a price in USD > 0 like 0.012"
                    )),
                }
            }
            _ => rest.push(item),
        }
    }
    let sla = match parse_sla(&rest.join(",")) {
        Ok(sla) => sla,
        Err(e) => {
            errors.extend(e);
            Vec::new()
        }
    };
    if sla.is_empty() && cost.is_none() && errors.is_empty() {
        errors.push("--sla: give at least one, e.g. ttft_p95=800ms".to_owned());
    }
    if errors.is_empty() {
        Ok((sla, cost))
    } else {
        Err(errors)
    }
}

/// `5%` or `0.05`: a share in (0, 1).
fn share(text: &str) -> Result<f64, String> {
    let v = match text.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
        None => text.trim().parse::<f64>(),
    }
    .map_err(|_| format!("`{text}` is not a share like 5% or 0.05"))?;
    if v > 0.0 && v < 1.0 {
        Ok(v)
    } else {
        Err(format!("`{text}` must be between 0 and 100%"))
    }
}

/// Sets `interrupt` on Ctrl-C until `done`; bounded by `limit`.
fn on_ctrl_c(interrupt: &AtomicBool, done: &AtomicBool, limit: Duration) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    runtime.block_on(async {
        let mut ctrl_c = std::pin::pin!(tokio::signal::ctrl_c());
        for _ in 0..limit.as_millis() / 100 {
            tokio::select! {
                r = &mut ctrl_c => {
                    if r.is_ok() {
                        interrupt.store(true, Ordering::Release);
                        eprintln!("capacity: interrupted, ending the stage running");
                    }
                    return;
                }
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
            if done.load(Ordering::Acquire) {
                return;
            }
        }
    });
}

fn invalid(errors: impl IntoIterator<Item = String>) -> ExitCode {
    for e in errors {
        eprintln!("{e}");
    }
    ExitCode::from(2)
}

fn unix_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests;
