//! `sluice report RUN.json`: a thin verb over `sluice_workload`'s report:
//! read the run (or capacity) file and the baseline (a file, or the newest
//! saved run of a name), write one self-contained HTML page or its JSON
//! twin, and exit 99 on a regression when asked.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;

use sluice_filters::ContentId;
use sluice_workload::{
    build_report, newest_baseline, parse_json, read_fit_text, render_html, report_artifact,
    sha256_file, write_atomically, AttachedFit, Metric, ReportInput, ReportOptions,
    DEFAULT_METRICS, THRESHOLDS_FAILED,
};

/// Where `baseline save` keeps runs by default.
pub(crate) const DEFAULT_DIR: &str = ".sluice/baselines";

#[derive(clap::Args, Clone, Debug)]
pub(crate) struct ReportArgs {
    /// A `sluice load` result, or a `sluice capacity` result.
    run: PathBuf,
    /// A result file to compare with, or the name of saved baselines (the
    /// newest is used).
    #[arg(long)]
    baseline: Option<String>,
    /// Where named baselines are kept.
    #[arg(long, default_value = DEFAULT_DIR)]
    dir: PathBuf,
    /// The page (or, with --json, the JSON); default report.html
    /// (report.json with --json).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Write the JSON twin of the page instead of the page.
    #[arg(long)]
    json: bool,
    /// Exit 99 when a metric regressed against the baseline.
    #[arg(long, requires = "baseline")]
    fail_on_regression: bool,
    /// A headline metric (repeatable, replaces the default list), e.g.
    /// `--metric p99_ttft_ms`.
    #[arg(long = "metric")]
    metrics: Vec<String>,
    /// A change under this percent of the baseline is not a regression,
    /// even beyond noise.
    #[arg(long, default_value_t = 5.0)]
    min_change: f64,
    /// A change of a time metric (ms) under this many milliseconds is not a
    /// regression either, whatever its percent.
    #[arg(long, default_value_t = 1.0)]
    min_change_ms: f64,
    /// A fit to draw the run's inter-arrival times against: the output of
    /// `sluice fit TRACE --json` (every candidate), a model file of
    /// `sluice fit -o`, or a run file with `arrival_fit`. Replaces the
    /// run's own `arrival_fit` (a `from_model:` run's).
    #[arg(long)]
    fit: Option<PathBuf>,
    #[command(flatten)]
    lineage: crate::lineage::LineageDir,
}

/// A file read as a run or a capacity result, and the run's lineage id
/// (`lineage.id`) when it has one; the error names the file.
fn read_input(path: &Path) -> Result<(ReportInput, Option<ContentId>), String> {
    let at = |e: String| format!("{}: {e}", path.display());
    let text = std::fs::read(path).map_err(|e| at(e.to_string()))?;
    let value = parse_json(&text).map_err(at)?;
    let id = value
        .pointer("/lineage/id")
        .and_then(|v| v.as_str())
        .and_then(|id| ContentId::parse(id).ok());
    Ok((ReportInput::read(&value).map_err(at)?, id))
}

/// A fit file read, each error naming the file.
pub(crate) fn read_fit(path: &Path) -> Result<AttachedFit, Vec<String>> {
    let name = path.display().to_string();
    let at = |e: String| format!("{name}: {e}");
    let text = std::fs::read_to_string(path).map_err(|e| vec![at(e.to_string())])?;
    read_fit_text(&text, &name).map_err(|errors| errors.into_iter().map(at).collect())
}

/// The headline metrics the flags name, or every error.
pub(crate) fn metrics(names: &[String]) -> Result<Vec<Metric>, Vec<String>> {
    let names: Vec<&str> = if names.is_empty() {
        DEFAULT_METRICS.to_vec()
    } else {
        names
            .iter()
            .flat_map(|n| n.split(','))
            .map(str::trim)
            .collect()
    };
    let mut errors = Vec::new();
    let mut out = Vec::new();
    for n in names {
        match Metric::parse(n) {
            Ok(m) => out.push(m),
            Err(e) => errors.push(format!("--metric: {e}")),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

fn fail(errors: &[String]) -> ExitCode {
    for e in errors {
        eprintln!("{e}");
    }
    ExitCode::from(2)
}

pub(crate) fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let metrics = match metrics(&args.metrics) {
        Ok(m) => m,
        Err(e) => return Ok(fail(&e)),
    };
    if !(args.min_change >= 0.0 && args.min_change.is_finite()) {
        return Ok(fail(&[format!(
            "--min-change: `{}` is not a percent ≥ 0",
            args.min_change
        )]));
    }
    if !(args.min_change_ms >= 0.0 && args.min_change_ms.is_finite()) {
        return Ok(fail(&[format!(
            "--min-change-ms: `{}` is not a number of milliseconds ≥ 0",
            args.min_change_ms
        )]));
    }
    let (input, run_id) = match read_input(&args.run) {
        Ok(i) => i,
        Err(e) => return Ok(fail(&[e])),
    };
    let baseline = match &args.baseline {
        None => None,
        Some(b) => {
            let path = if Path::new(b).is_file() {
                PathBuf::from(b)
            } else {
                match newest_baseline(&args.dir, b) {
                    Ok(s) => s.path,
                    Err(e) => {
                        return Ok(fail(&[format!("--baseline {b}: no file `{b}`, and {e}")]))
                    }
                }
            };
            match read_input(&path) {
                Ok(i) => Some(i),
                Err(e) => return Ok(fail(&[format!("--baseline: {e}")])),
            }
        }
    };
    let (baseline, baseline_id) = match baseline {
        Some((input, id)) => (Some(input), id),
        None => (None, None),
    };
    let fit = match args.fit.as_deref().map(read_fit).transpose() {
        Ok(f) => f,
        Err(e) => return Ok(fail(&e)),
    };
    // The fit drawn is one of the report's inputs, by its bytes.
    let fit_sha256 = match &args.fit {
        Some(path) => Some(sha256_file(path).with_context(|| path.display().to_string())?),
        None => None,
    };
    let options = ReportOptions {
        metrics,
        min_change_pct: args.min_change,
        min_change_ms: args.min_change_ms,
        fit,
    };
    let mut report = build_report(&input, baseline.as_ref(), &options);
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    let default = if args.json {
        "report.json"
    } else {
        "report.html"
    };
    let output = args.output.unwrap_or_else(|| PathBuf::from(default));
    // The id is set before the page is drawn: the page shows it.
    let made = report_artifact(
        &output.file_name().map_or_else(
            || output.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        ),
        run_id.as_ref(),
        baseline_id.as_ref(),
        serde_json::json!({
            "metrics": options.metrics.iter().map(|m| m.name().to_owned()).collect::<Vec<_>>(),
            "min_change_pct": options.min_change_pct,
            "min_change_ms": options.min_change_ms,
            "fit_sha256": fit_sha256,
        }),
    );
    report.id = Some(made.id.clone());
    report.parents = made.parents.clone();
    let bytes = if args.json {
        serde_json::to_vec_pretty(&report)?
    } else {
        render_html(&report).into_bytes()
    };
    write_atomically(&output, &bytes)?;
    eprintln!("wrote {}", output.display());
    if let Some(sweep) = &report.context_sweep {
        eprint!("context sweep:\n{}", sweep.table());
    }
    crate::lineage::keep("report", &args.lineage.lineage_dir, &[made]);
    if let Some(b) = &report.baseline {
        if b.regressions.is_empty() {
            eprintln!("report: no regression beyond noise");
        } else {
            eprintln!("report: regressed: {}", b.regressions.join(", "));
        }
    }
    Ok(if args.fail_on_regression && report.regressed() {
        ExitCode::from(THRESHOLDS_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn bad_files_and_metrics_are_named_with_the_file() {
        let dir = std::env::temp_dir().join(format!("sluice-report-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cut = dir.join("run.json");
        std::fs::write(&cut, "{\n  \"v\": 1,\n  \"scenario\": \"ch").unwrap();
        assert_eq!(
            read_input(&cut).unwrap_err(),
            format!(
                "{}: the file ends early at line 3 column 17: truncated (was the run stopped \
                 while writing it?)",
                cut.display()
            )
        );
        std::fs::write(&cut, "{\"v\": 1, \"scenario\": \"chat\"}").unwrap();
        assert_eq!(
            read_input(&cut).unwrap_err(),
            format!("{}: lineage: missing", cut.display())
        );
        let missing = dir.join("nope.json");
        assert_eq!(
            read_input(&missing).unwrap_err(),
            format!(
                "{}: No such file or directory (os error 2)",
                missing.display()
            )
        );
        assert_eq!(
            metrics(&["p99_ttft_ms,p98_ttft_ms".to_owned()]).unwrap_err(),
            [
                "--metric: unknown metric `p98_ttft_ms` (known: {median,p90,p95,p99,p999}_{ttft,\
              ttft_sent,tpot,itl,e2el,service_time,dispatch_lag}_ms, request_throughput, \
              output_throughput, error_rate, hit_ratio, queued_share, late_share)"
            ]
        );
        assert_eq!(metrics(&[]).unwrap().len(), DEFAULT_METRICS.len());
        let fit = dir.join("fit.json");
        std::fs::write(
            &fit,
            r#"{"best": "gamma", "candidates": [{"kind": "gamma", "params": {"shape": 0, "scale": 1}}]}"#,
        )
        .unwrap();
        assert_eq!(
            read_fit(&fit).unwrap_err(),
            [format!(
                "{}: candidates[0].params.shape: must be a finite number > 0, found 0",
                fit.display()
            )]
        );
        let model = dir.join("model.yaml");
        std::fs::write(&model, "v: 1\narrival: { kind: exponential, rate: 2 }\n").unwrap();
        assert_eq!(
            read_fit(&model).unwrap_err(),
            [format!("{}: missing field `source`", model.display())]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
