//! The soak (see `sluice_benches::soak`): the `sluice` binary at `--sluice`
//! under mixed traffic and churn for `--minutes`, sampled every
//! `--sample-seconds`. Prints the series as a Markdown table and the goals;
//! exits 1 when one is missed.
//!
//! benches/soak.sh --minutes 30

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use sluice_benches::soak::{self, SoakPlan};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 30.0)]
    minutes: f64,
    #[arg(long, default_value_t = 10)]
    sample_seconds: u64,
    /// Minutes of warm-up before growth counts (default: a third of the run).
    #[arg(long)]
    warm_up_minutes: Option<f64>,
    /// The `sluice` binary.
    #[arg(long)]
    sluice: PathBuf,
    #[arg(long, default_value_t = 64 << 10)]
    max_body: usize,
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let plan = SoakPlan {
        duration: Duration::from_secs_f64(args.minutes * 60.0),
        sample_every: Duration::from_secs(args.sample_seconds),
        warm_up: Duration::from_secs_f64(args.warm_up_minutes.unwrap_or(args.minutes / 3.0) * 60.0),
        sluice: args.sluice,
        max_body: args.max_body,
        concurrency: args.concurrency,
        max_rss_growth: 0.05,
    };
    let soak = soak::run(&plan, &|s| {
        eprintln!(
            "soak: {:.0} s, RSS {:.1} MiB, {} fds, tasks {:?}, {} requests, {} errors",
            s.seconds,
            s.rss_kib as f64 / 1024.0,
            s.fds,
            s.tasks,
            s.requests,
            s.errors
        );
    })?;
    print_report(&soak::report(&plan, &soak));
    if soak.missed(&plan).is_empty() {
        Ok(())
    } else {
        std::process::exit(1)
    }
}

/// The report is the bench's output: stdout, where a script reads it.
#[allow(clippy::print_stdout)]
fn print_report(text: &str) {
    print!("{text}");
}
