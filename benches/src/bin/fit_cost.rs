//! The cost of `sluice fit`: fitting 1,000,000 inter-arrival times (all
//! five kinds, the mixture's EM included, with KS and KL), and the whole fit
//! of a 1,000,000-row BurstGPT CSV, parsing and hashing included. The data
//! are seeded: a two-Weibull mixture of gaps (70% shape 0.8 scale 1 s, 30%
//! shape 2.5 scale 50 ms) and lognormal lengths with a 5% cap. One thread.
//! Each figure is the median of `--rounds` rounds.
//!
//! cargo build --release -p sluice-benches --bin fit_cost && target/release/fit_cost

use std::fmt::Write as _;
use std::time::Instant;

use clap::Parser;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal, Weibull};
use sluice_workload::{fit_file, fit_gaps, FitOptions};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Inter-arrival times, and rows of the CSV.
    #[arg(long, default_value_t = 1_000_000)]
    n: usize,
    /// Write the CSV here and keep it (to time `sluice fit` on it).
    #[arg(long)]
    keep_csv: Option<std::path::PathBuf>,
}

fn gaps(n: usize) -> Vec<f64> {
    let mut rng = StdRng::seed_from_u64(42);
    let (Ok(slow), Ok(fast)) = (Weibull::new(1.0, 0.8), Weibull::new(0.05, 2.5)) else {
        return Vec::new();
    };
    (0..n)
        .map(|_| {
            let pick: f64 = rng.random();
            let g: f64 = if pick < 0.7 {
                slow.sample(&mut rng)
            } else {
                fast.sample(&mut rng)
            };
            g.max(1e-6)
        })
        .collect()
}

fn csv(gaps: &[f64]) -> String {
    let mut rng = StdRng::seed_from_u64(7);
    let (Ok(input), Ok(output)) = (
        LogNormal::<f64>::new(6.0, 0.8),
        LogNormal::<f64>::new(5.0, 1.0),
    ) else {
        return String::new();
    };
    let mut text =
        String::from("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n");
    let mut at_us = 0u64;
    for g in gaps {
        at_us += (g * 1e6).round().max(1.0) as u64;
        let i = input.sample(&mut rng).ceil() as u64;
        let o = (output.sample(&mut rng).ceil() as u64).min(769);
        let _ = writeln!(
            text,
            "{}.{:06},ChatGPT,{i},{o},{},Conversation log",
            at_us / 1_000_000,
            at_us % 1_000_000,
            i + o
        );
    }
    text
}

/// This thread's CPU time (user + system) in seconds, from
/// /proc/thread-self/stat (clock ticks of 10 ms): on a shared machine the
/// wall clock also counts the time other processes had the core.
fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    // The fields after the command name's closing parenthesis, from the
    // state on; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    match (ticks(11), ticks(12)) {
        (Some(u), Some(s)) => (u + s) / 100.0,
        _ => f64::NAN,
    }
}

/// Runs `f` `rounds` times; the median wall and CPU seconds.
fn timed(rounds: usize, mut f: impl FnMut()) -> (f64, f64) {
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (start, cpu_start) = (Instant::now(), cpu_s());
        f();
        wall.push(start.elapsed().as_secs_f64());
        cpu.push(cpu_s() - cpu_start);
    }
    (median(wall), median(cpu))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

// A bench prints its table on stdout.
#[allow(clippy::print_stdout)]
fn main() {
    let args = Args::parse();
    let data = gaps(args.n);
    let mut best = String::new();
    let (fit_s, fit_cpu) = timed(args.rounds, || {
        best = fit_gaps(data.clone()).map_or_else(|e| e, |f| f.best.kind().to_owned());
    });
    let path = args.keep_csv.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("sluice-fit-cost-{}.csv", std::process::id()))
    });
    let text = csv(&data);
    if let Err(e) = std::fs::write(&path, &text) {
        eprintln!("{}: {e}", path.display());
        std::process::exit(1);
    }
    let mut warnings = 0;
    let (file_s, file_cpu) = timed(args.rounds, || {
        match fit_file(&path, None, &FitOptions::default(), 0) {
            Ok(f) => warnings = f.warnings.len(),
            Err(e) => eprintln!("{e}"),
        }
    });
    if args.keep_csv.is_none() {
        let _ = std::fs::remove_file(&path);
    }
    println!(
        "| what (median of {} rounds) | n | wall s | CPU s (this thread) |",
        args.rounds
    );
    println!("|---|---:|---:|---:|");
    println!(
        "| fit {} inter-arrival times (best: {best}) | {} | {fit_s:.3} | {fit_cpu:.2} |",
        args.n, args.n
    );
    println!(
        "| fit_file of a {:.0} MiB BurstGPT CSV ({warnings} warnings) | {} | {file_s:.3} | {file_cpu:.2} |",
        text.len() as f64 / (1 << 20) as f64,
        args.n
    );
}
