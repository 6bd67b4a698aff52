//! `sluice ctl mirror set|off|diffs|baseline`.

use anyhow::{bail, Context as _};
use clap::{Args, Subcommand};
use serde_json::Value;
use sluice_control::ApiEndpoint;

use super::{call_to, given, read_file, Call};

#[derive(Subcommand)]
pub(super) enum MirrorCommand {
    /// Set a route's mirror policy: `sluice ctl mirror set chat --cluster shadow --percent 10 --copies 3`,
    /// or the whole policy from a YAML or JSON file with `--file`.
    Set(MirrorSet),
    /// Stop mirroring a route.
    Off { route: String },
    /// The most recent shadow answers that differed from the primary's.
    Diffs,
    /// A route's embedding drift baseline, as the file
    /// `compare.embeddings.baseline` reads: `sluice ctl mirror baseline chat --out chat.json`.
    Baseline {
        route: String,
        /// Write it to this file (else it goes to stdout).
        #[arg(long)]
        out: Option<std::path::PathBuf>,
    },
}

#[derive(Args)]
pub(super) struct MirrorSet {
    route: String,
    /// The policy as YAML or JSON (the shape of `routes[].mirror`); no other flag with it.
    #[arg(long, conflicts_with_all = ["cluster", "percent", "copies", "sample_by", "max_body", "rate_limit", "max_in_flight", "timeout"])]
    file: Option<std::path::PathBuf>,
    #[arg(long)]
    cluster: Option<String>,
    #[arg(long)]
    percent: Option<f64>,
    #[arg(long)]
    copies: Option<f64>,
    /// Header whose value decides sampling (whole sessions).
    #[arg(long)]
    sample_by: Option<String>,
    /// e.g. `1MiB`.
    #[arg(long)]
    max_body: Option<String>,
    #[arg(long)]
    rate_limit: Option<f64>,
    #[arg(long)]
    max_in_flight: Option<u32>,
    /// e.g. `30s`.
    #[arg(long)]
    timeout: Option<String>,
}

/// The request a mirror command makes.
pub(super) fn request(command: &MirrorCommand) -> anyhow::Result<Call> {
    Ok(match command {
        MirrorCommand::Set(set) => {
            call_to(ApiEndpoint::PutMirror, &[&set.route], Some(set_body(set)?))
        }
        MirrorCommand::Off { route } => call_to(ApiEndpoint::DeleteMirror, &[route], None),
        MirrorCommand::Diffs => call_to(ApiEndpoint::MirrorDiffs, &[], None),
        MirrorCommand::Baseline { route, .. } => {
            call_to(ApiEndpoint::MirrorBaseline, &[route], None)
        }
    })
}

/// `baseline --out FILE`: writes the answer there, checked as the config
/// will read it; the line to print.
pub(super) fn save_baseline(file: &std::path::Path, answer: &str) -> anyhow::Result<String> {
    let saved = sluice_filters::SavedBaseline::parse(answer)
        .map_err(|e| anyhow::anyhow!("the answer is not a baseline: {e}"))?;
    std::fs::write(file, saved.to_json()).with_context(|| file.display().to_string())?;
    Ok(format!(
        "wrote {} ({} pairs)",
        file.display(),
        saved.similarities.len()
    ))
}

fn set_body(set: &MirrorSet) -> anyhow::Result<String> {
    if let Some(file) = &set.file {
        return read_file(file);
    }
    let Some(cluster) = &set.cluster else {
        bail!("give --cluster (or the whole policy with --file)");
    };
    let map = given([
        ("cluster", Some(cluster.clone().into())),
        ("percent", set.percent.map(Value::from)),
        ("copies", set.copies.map(Value::from)),
        ("sample_by", set.sample_by.clone().map(Value::from)),
        ("max_body", set.max_body.clone().map(Value::from)),
        ("rate_limit", set.rate_limit.map(Value::from)),
        ("max_in_flight", set.max_in_flight.map(Value::from)),
        ("timeout", set.timeout.clone().map(Value::from)),
    ]);
    Ok(Value::Object(map).to_string())
}
