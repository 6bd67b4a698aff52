//! `sluice trace convert` and `sluice trace stats`: thin verbs over
//! `sluice_workload`'s trace readers, writers and statistics.

use crate::out;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use sluice_workload::{
    convert, for_each_row, partial_path, Format, Lengths, Skipped, StatsBuilder, TraceError,
    TraceReader, TraceStats, TraceWriter,
};

#[derive(clap::Args)]
pub(crate) struct TraceArgs {
    #[command(subcommand)]
    command: TraceCommand,
}

#[derive(Subcommand)]
enum TraceCommand {
    /// Convert a trace between sluice JSONL, Mooncake JSONL, the Azure LLM
    /// inference CSV and the BurstGPT CSV. Exit 2 on a bad row.
    Convert {
        input: PathBuf,
        output: PathBuf,
        /// The input's format; found from its content when absent.
        #[arg(long, value_parser = format)]
        from: Option<Format>,
        #[arg(long, value_parser = format)]
        to: Format,
        /// Count bad rows and go on, instead of stopping at the first.
        #[arg(long)]
        skip_bad: bool,
    },
    /// Requests, rate, burstiness (iat_cv, dispersion at 1 s, 10 s, 60 s),
    /// lengths, sessions, and quantised timestamps.
    Stats {
        file: PathBuf,
        #[arg(long, value_parser = format)]
        from: Option<Format>,
        /// The figures as JSON, for machines.
        #[arg(long)]
        json: bool,
        #[arg(long)]
        skip_bad: bool,
    },
}

fn format(name: &str) -> Result<Format, String> {
    Format::from_name(name)
}

pub(crate) fn run(args: TraceArgs) -> anyhow::Result<ExitCode> {
    let result = match args.command {
        TraceCommand::Convert {
            input,
            output,
            from,
            to,
            skip_bad,
        } => run_convert(&input, &output, from, to, skip_bad),
        TraceCommand::Stats {
            file,
            from,
            json,
            skip_bad,
        } => run_stats(&file, from, json, skip_bad),
    };
    Ok(match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    })
}

/// Written beside `output` and renamed over it at the end, so that a failed
/// conversion leaves no half file behind.
fn run_convert(
    input: &Path,
    output: &Path,
    from: Option<Format>,
    to: Format,
    skip_bad: bool,
) -> Result<(), TraceError> {
    let mut reader = TraceReader::open(input, from)?;
    let out_name = output.display().to_string();
    let partial = partial_path(output);
    let io_error = |e: std::io::Error| TraceError::new(&out_name, 0, e.to_string());
    let file = File::create(&partial).map_err(io_error)?;
    let writer = TraceWriter::new(to, BufWriter::new(file));
    let done = convert(&mut reader, writer, &out_name, skip_bad).and_then(|(done, _)| {
        std::fs::rename(&partial, output)
            .map_err(io_error)
            .map(|()| done)
    });
    let done = match done {
        Ok(done) => done,
        Err(e) => {
            // Best effort: the error being reported matters more.
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    report_skipped(&done.skipped);
    out(&format!(
        "{} ({}) -> {} ({}): {} rows",
        input.display(),
        done.from,
        output.display(),
        done.to,
        done.rows
    ));
    Ok(())
}

fn run_stats(
    file: &Path,
    from: Option<Format>,
    json: bool,
    skip_bad: bool,
) -> Result<(), TraceError> {
    let mut reader = TraceReader::open(file, from)?;
    let mut builder = StatsBuilder::default();
    let skipped = for_each_row(&mut reader, skip_bad, |line| {
        builder.add(line);
        Ok(())
    })?;
    let name = file.display().to_string();
    let stats = builder.finish().map_err(|e| TraceError::new(&name, 0, e))?;
    report_skipped(&skipped);
    let text = if json {
        serde_json::to_string_pretty(&stats)
            .map_err(|e| TraceError::new(&name, 0, e.to_string()))?
    } else {
        render(&name, reader.format(), &stats)
    };
    out(&text);
    Ok(())
}

fn report_skipped(skipped: &Skipped) {
    if skipped.count == 0 {
        return;
    }
    let rows = if skipped.count == 1 { "row" } else { "rows" };
    eprintln!("skipped {} bad {rows}; the first:", skipped.count);
    for e in &skipped.first {
        eprintln!("  {e}");
    }
}

fn render(name: &str, format: Format, s: &TraceStats) -> String {
    let opt = |v: Option<f64>, digits: usize| v.map_or("-".to_owned(), |v| format!("{v:.digits$}"));
    let lengths = |l: &Option<Lengths>| match l {
        Some(l) => format!(
            "p50 {}  p90 {}  p99 {}  max {}  mean {:.1}",
            l.p50, l.p90, l.p99, l.max, l.mean
        ),
        None => "-".to_owned(),
    };
    let mut lines = vec![
        format!("{name} ({format})"),
        format!("requests         {}", s.requests),
        format!("duration         {:.3} s", s.duration_s),
        format!("mean rate        {} /s", opt(s.mean_rate, 3)),
        format!("iat cv           {}", opt(s.iat_cv, 3)),
        format!(
            "dispersion       1s {}  10s {}  60s {}",
            opt(s.idc_1s, 2),
            opt(s.idc_10s, 2),
            opt(s.idc_60s, 2)
        ),
        format!(
            "zero iats        {}%",
            opt(s.zero_iat_share.map(|z| z * 100.0), 1)
        ),
        format!("input tokens     {}", lengths(&s.input_tokens)),
        format!("output tokens    {}", lengths(&s.output_tokens)),
        format!("sessions         {}", s.sessions),
        format!("turns/session    {}", lengths(&s.turns_per_session)),
    ];
    lines.extend(s.warnings.iter().map(|w| format!("warning: {w}")));
    lines.join("\n")
}
