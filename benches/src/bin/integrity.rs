//! Integrity under churn (see `sluice_benches::integrity`): `--requests`
//! checksummed requests through an in-process sluice while the split swaps,
//! delay experiments come and go, the config reloads and a ×2 mirror runs.
//! Prints the totals and exits 1 unless they add up with nothing corrupted
//! and nothing failed.
//!
//! cargo run --release -p sluice-benches --bin integrity -- --requests 1000000

use clap::Parser;
use sluice_benches::integrity::{self, Plan};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 1_000_000)]
    requests: u64,
    /// The largest body, each way, in bytes (default 4 MiB).
    #[arg(long, default_value_t = 4 << 20)]
    max_body: usize,
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let plan = Plan {
        requests: args.requests,
        max_body: args.max_body,
        concurrency: args.concurrency,
        seed: args.seed,
        ..Plan::full()
    };
    let totals = integrity::run(&plan, &|ended, seconds| {
        eprintln!(
            "integrity: {ended} of {} ended after {seconds:.0} s ({:.0}/s)",
            plan.requests,
            ended as f64 / seconds.max(0.001)
        );
    })?;
    print_report(&integrity::report(&plan, &totals));
    if totals.discrepancies(integrity::COPIES).is_empty() && totals.failed() == 0 {
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
