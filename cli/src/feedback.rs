//! `sluice feedback list [DIR] [--json]`: the scenarios saved under a
//! `feedback.dir` when a rollout breached or a fault experiment halted,
//! why each was saved, and its weight now (what `sluice load --feedback`
//! would mix it in with).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use sluice_workload::{feedback_rows, feedback_table, read_feedback_dir};

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

/// Now, for the weights, µs since the epoch.
pub(crate) fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}
