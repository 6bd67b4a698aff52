//! `sluice feedback list [DIR] [--json]`: the scenarios saved under a
//! `feedback.dir` when a rollout breached or a fault experiment halted,
//! why each was saved, and its weight now; and `sluice load --feedback
//! DIR`'s reading and mixing of them into the run.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use sluice_workload::{
    feedback_rows, feedback_table, mix_feedback, read_feedback_dir, FeedbackMix, Mixed, Scenario,
};

/// Where `feedback list` looks without a DIR.
pub(crate) const DEFAULT_DIR: &str = "feedback";

#[derive(clap::Args, Clone, Debug)]
pub(crate) struct FeedbackArgs {
    #[command(subcommand)]
    command: FeedbackCommand,
}

#[derive(clap::Subcommand, Clone, Debug)]
enum FeedbackCommand {
    /// Each saved scenario: id, trigger (gate, value, bound), route,
    /// cluster@version, requests, when saved, initial weight, weight now
    /// and half-life. Exit 2 when the directory or a scenario cannot be read.
    List {
        /// The config's `feedback.dir` (default `feedback`).
        #[arg(default_value = DEFAULT_DIR)]
        dir: PathBuf,
        /// One JSON array instead of the table.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn run(args: FeedbackArgs) -> anyhow::Result<ExitCode> {
    let FeedbackCommand::List { dir, json } = args.command;
    let saved = match read_feedback_dir(&dir) {
        Ok(s) => s,
        Err(errors) => {
            for e in errors {
                eprintln!("{e}");
            }
            return Ok(ExitCode::from(2));
        }
    };
    let rows = feedback_rows(&saved, now_us());
    let text = match json {
        true => serde_json::to_string_pretty(&rows)?,
        false => feedback_table(&rows),
    };
    let _ = writeln!(std::io::stdout().lock(), "{text}");
    Ok(ExitCode::SUCCESS)
}

/// `--feedback DIR`: the saved scenarios mixed into the run, each said on
/// stderr with its weight and how many requests it adds; with a synthetic
/// scenario, the saved requests planned beside its journeys. `closed`:
/// `--closed`, refused then (the saved requests keep their times).
pub(crate) fn mix(
    scenario: &mut Scenario,
    dir: &Path,
    closed: Option<usize>,
) -> Result<(FeedbackMix, Option<Mixed>), Vec<String>> {
    let saved = read_feedback_dir(dir).map_err(|errors| {
        errors
            .into_iter()
            .map(|e| format!("--feedback: {e}"))
            .collect::<Vec<_>>()
    })?;
    let own_steps = scenario.steps.len();
    let mut mix = mix_feedback(scenario, &saved, now_us()).map_err(|e| vec![e])?;
    for r in &mix.runs {
        eprintln!(
            "load: feedback {} ({}, route {}): weight {:.2} now, {} request(s) mixed in ({} recorded)",
            r.id, r.trigger, r.route, r.weight, r.mixed_requests, r.recorded_requests
        );
    }
    let Some(recording) = mix.beside.take() else {
        return Ok((mix, None));
    };
    if closed.is_some() {
        return Err(vec![
            "--closed: --feedback sends the saved requests at their recorded times; a synthetic \
             scenario with --feedback runs open loop only"
                .to_owned(),
        ]);
    }
    let synthetic = scenario
        .plan
        .schedule()
        .map_err(|e| vec![format!("workload: {e}")])?;
    let span_us = synthetic.span_us;
    let mixed = Mixed::new(&scenario.plan, synthetic, own_steps, recording)
        .map_err(|e| vec![format!("--feedback: {e}")])?;
    if mixed.schedule.span_us > span_us {
        eprintln!(
            "load: feedback: the saved requests run to {:.1} s, past the scenario's {:.1} s: \
             the run lasts until then",
            mixed.schedule.span_us as f64 / 1e6,
            span_us as f64 / 1e6
        );
    }
    Ok((mix, Some(mixed)))
}

/// Now, for the weights, µs since the epoch.
pub(crate) fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}
