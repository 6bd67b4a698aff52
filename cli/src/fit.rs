//! `sluice fit`: a thin verb over `sluice_workload`'s fit: read a trace,
//! print the fit (or its candidates side by side, or JSON), and write the
//! model file only when the whole fit succeeded.

use crate::out;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sluice_workload::{
    compare_table, fit_to, parse_duration, FitOptions, Fitted, Format, TokenLengths,
};

/// `sluice fit`: the trace, where the model goes, and how to print the fit.
#[derive(clap::Args)]
#[command(after_help = sluice_workload::KL_DEFINITION)]
pub(crate) struct FitArgs {
    /// sluice JSONL, Mooncake JSONL, an Azure or a BurstGPT CSV.
    trace: PathBuf,
    /// Write the model (YAML, the `workload:` block of `sluice load`).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// The width of the rate curve's windows.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    window: Duration,
    /// The input's format; found from its content when absent.
    #[arg(long, value_parser = Format::from_name)]
    from: Option<Format>,
    /// The fit as JSON: {"best", "candidates": [{"kind", "params", "loglik",
    /// "aic", "bic", "ks", "kl"}], ...}.
    #[arg(long, conflicts_with = "compare")]
    json: bool,
    /// The candidates side by side: KL, KS, AIC, BIC, parameters.
    #[arg(long)]
    compare: bool,
    #[command(flatten)]
    lineage: crate::lineage::LineageDir,
}

pub(crate) fn run(args: FitArgs) -> anyhow::Result<ExitCode> {
    let now_us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
    let options = FitOptions {
        window: args.window,
    };
    let fitted = match fit_to(
        &args.trace,
        args.from,
        &options,
        args.output.as_deref(),
        now_us,
    ) {
        Ok(fitted) => fitted,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(2));
        }
    };
    let text = if args.json {
        serde_json::to_string_pretty(&fitted)?
    } else if args.compare {
        let mut text = compare_table(&fitted.arrival);
        if let Some(starts) = fitted.sessions.as_ref().and_then(|s| s.arrival.as_ref()) {
            text.push_str("\n\nsession starts\n");
            text.push_str(&compare_table(starts));
        }
        text
    } else {
        render(&fitted)
    };
    out(&text);
    for w in &fitted.warnings {
        eprintln!("warning: {w}");
    }
    if let Some(path) = &args.output {
        eprintln!("wrote {}", path.display());
        keep_model(path, &args.lineage.lineage_dir);
    }
    Ok(ExitCode::SUCCESS)
}

fn render(f: &Fitted) -> String {
    let opt = |v: Option<f64>| v.map_or("-".to_owned(), |v| v.to_string());
    let lengths = |l: &Option<TokenLengths>| match l {
        Some(l) => {
            let cap = l.cap.map_or(String::new(), |c| {
                format!("  cap {} ({})", c.tokens, c.share)
            });
            format!(
                "lognormal mu {} sigma {} in [{}, {}]{cap}",
                l.mu, l.sigma, l.min, l.max
            )
        }
        None => "-".to_owned(),
    };
    let best = f
        .arrival
        .candidates
        .iter()
        .find(|c| c.arrival == f.arrival.best);
    let mut lines = vec![
        f.model.source.trace.clone(),
        format!("requests         {}", f.requests),
        format!(
            "arrivals         {} ({})",
            f.arrival.best.kind(),
            serde_json::to_string(&f.arrival.best).unwrap_or_default()
        ),
        format!(
            "fit              ks {}  kl {}  (of {} candidates, by BIC)",
            best.map_or("-".to_owned(), |c| format!("{:.4}", c.ks)),
            best.and_then(|c| c.kl)
                .map_or("-".to_owned(), |kl| format!("{kl:.4}")),
            f.arrival.candidates.len()
        ),
        format!(
            "dispersion       1s {}  10s {}  60s {}",
            opt(f.idc_1s),
            opt(f.idc_10s),
            opt(f.idc_60s)
        ),
        format!("windows          {} of {} s", f.windows.len(), f.window_s),
        format!("input tokens     {}", lengths(&f.input_tokens)),
        format!("output tokens    {}", lengths(&f.output_tokens)),
        format!("token spearman   {}", opt(f.token_spearman)),
    ];
    if let Some(s) = &f.sessions {
        lines.push(format!(
            "sessions         {}  turns p50 {} p90 {} max {}",
            s.sessions, s.turns.p50, s.turns.p90, s.turns.max
        ));
        lines.push(format!(
            "think time       {}",
            s.think_time
                .as_ref()
                .and_then(|t| serde_json::to_string(t).ok())
                .unwrap_or_else(|| "-".to_owned())
        ));
        lines.push(format!(
            "session starts   {}",
            s.arrival
                .as_ref()
                .and_then(|a| serde_json::to_string(&a.best).ok())
                .unwrap_or_else(|| "-".to_owned())
        ));
    }
    lines.join("\n")
}

/// The model file written as a lineage artefact (the id a scenario's
/// `from_model:` gives it too), kept in `dir`.
fn keep_model(path: &std::path::Path, dir: &std::path::Path) {
    let label = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let made = std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|text| sluice_workload::model_artifact(&label, &text));
    match made {
        Ok(model) => {
            eprintln!("lineage: model {} ({label})", model.id);
            crate::lineage::keep("fit", dir, &[model]);
        }
        Err(e) => eprintln!("fit: warning: no lineage id: {}: {e}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_written_model_is_kept_with_the_id_its_scenarios_name() {
        let dir = std::env::temp_dir().join(format!("sluice-fit-lineage-{}", std::process::id()));
        let lineage = dir.join("lineage");
        std::fs::create_dir_all(&dir).unwrap();
        let model = dir.join("model.yaml");
        std::fs::write(&model, "arrival: { kind: poisson, rate: 2.5 }\n").unwrap();
        keep_model(&model, &lineage);
        let (kept, corrupt) = sluice_workload::read_lineage_dir(&lineage).unwrap();
        assert!(corrupt.is_empty(), "{corrupt:?}");
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].kind.name(), "model");
        assert_eq!(kept[0].label, "model.yaml");
        // A scenario built on it names the same id as its parent.
        let scenario = dir.join("scenario.yaml");
        std::fs::write(&scenario, "scenario: s\nfrom_model: model.yaml\n").unwrap();
        let nodes = crate::lineage::scenario_nodes(&scenario, Some("model.yaml")).unwrap();
        assert_eq!(nodes[0].id, kept[0].id);
        assert_eq!(nodes[1].parents, vec![kept[0].id.clone()]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
