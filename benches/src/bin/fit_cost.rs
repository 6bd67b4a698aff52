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
    let fit_s = median(
        (0..args.rounds)
            .map(|_| {
                let copy = data.clone();
                let start = Instant::now();
                let fit = fit_gaps(copy);
                let s = start.elapsed().as_secs_f64();
                best = fit.map_or_else(|e| e, |f| f.best.kind().to_owned());
                s
            })
            .collect(),
    );
    let path = std::env::temp_dir().join(format!("sluice-fit-cost-{}.csv", std::process::id()));
    let text = csv(&data);
    if let Err(e) = std::fs::write(&path, &text) {
        eprintln!("{}: {e}", path.display());
        std::process::exit(1);
    }
    let mut warnings = 0;
    let file_s = median(
        (0..args.rounds)
            .map(|_| {
                let start = Instant::now();
                let fit = fit_file(&path, None, &FitOptions::default(), 0);
                let s = start.elapsed().as_secs_f64();
                match fit {
                    Ok(f) => warnings = f.warnings.len(),
                    Err(e) => eprintln!("{e}"),
                }
                s
            })
            .collect(),
    );
    let _ = std::fs::remove_file(&path);
    println!("| what | n | seconds (median of {}) |", args.rounds);
    println!("|---|---:|---:|");
    println!(
        "| fit {} inter-arrival times (best: {best}) | {} | {fit_s:.3} |",
        args.n, args.n
    );
    println!(
        "| fit_file of a {:.0} MiB BurstGPT CSV ({warnings} warnings) | {} | {file_s:.3} |",
        text.len() as f64 / (1 << 20) as f64,
        args.n
    );
}
