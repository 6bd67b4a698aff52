//! `sluice baseline save RUN.json --name chat` and `sluice baseline list`:
//! saved runs as the SLO's history, in `.sluice/baselines/` or `--dir`.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use sluice_workload::{list_baselines, parse_json, save_baseline, trend_table, ReportInput, Run};

use crate::report::{metrics, DEFAULT_DIR};

#[derive(clap::Args, Clone, Debug)]
pub(crate) struct BaselineArgs {
    #[command(subcommand)]
    command: BaselineCommand,
}

#[derive(clap::Subcommand, Clone, Debug)]
enum BaselineCommand {
    /// Keep a run (a `sluice load` or `sluice capacity` result) under a
    /// name; `sluice report --baseline NAME` compares with the newest.
    Save {
        run: PathBuf,
        #[arg(long)]
        name: String,
        #[arg(long, default_value = DEFAULT_DIR)]
        dir: PathBuf,
    },
    /// Each name's saved runs, and each metric's trend over them.
    List {
        #[arg(long, default_value = DEFAULT_DIR)]
        dir: PathBuf,
        /// A metric to show (repeatable; default the report's headline).
        #[arg(long = "metric")]
        metrics: Vec<String>,
    },
}

pub(crate) fn run(args: BaselineArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        BaselineCommand::Save { run, name, dir } => {
            let text = match std::fs::read(&run) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("{}: {e}", run.display());
                    return Ok(ExitCode::from(2));
                }
            };
            match save_baseline(&dir, &name, &text) {
                Ok(s) => {
                    eprintln!("saved {} #{} as {}", s.name, s.seq, s.path.display());
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!("{}: {e}", run.display());
                    Ok(ExitCode::from(2))
                }
            }
        }
        BaselineCommand::List {
            dir,
            metrics: names,
        } => {
            let metrics = match metrics(&names) {
                Ok(m) => m,
                Err(errors) => {
                    for e in errors {
                        eprintln!("{e}");
                    }
                    return Ok(ExitCode::from(2));
                }
            };
            let listed = match list_baselines(&dir) {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("{e}");
                    return Ok(ExitCode::from(2));
                }
            };
            if listed.is_empty() {
                eprintln!("no baselines in {}", dir.display());
            }
            let mut text = Vec::new();
            for (name, saved) in listed {
                let mut runs = Vec::new();
                for s in saved {
                    // A saved run that no longer reads is named and left out.
                    match std::fs::read(&s.path)
                        .map_err(|e| e.to_string())
                        .and_then(|t| parse_json(&t))
                        .and_then(|v| ReportInput::read(&v))
                        .map(|i| i.run().clone())
                    {
                        Ok(r) => runs.push((s, r)),
                        Err(e) => eprintln!("{}: {e}", s.path.display()),
                    }
                }
                let runs: Vec<(_, Run)> = runs;
                text.push(trend_table(&name, &runs, &metrics));
            }
            let _ = writeln!(std::io::stdout().lock(), "{}", text.join("\n\n"));
            Ok(ExitCode::SUCCESS)
        }
    }
}
