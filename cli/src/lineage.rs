//! `sluice lineage [ID] [--dot|--json]`: the lineage DAG from the artefact
//! files (`.sluice/lineage`) and, with `--admin`, the live control API's
//! artefacts; with an id, what it came from and what was made from it.
//! Also the helpers that `load`, `capacity` and `report` use to name what
//! they read and to store what they made.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use sluice_cli::ctl::{self, AdminToken};
use sluice_control::ApiEndpoint;
use sluice_filters::{Artifact, ContentId};
use sluice_workload::{
    model_artifact, read_lineage_dir, scenario_artifact, write_artifact, LineageGraph, LINEAGE_DIR,
    LINEAGE_DIR_ENV,
};

/// `--lineage-dir` of the verbs that make artefacts.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct LineageDir {
    /// Where the artefacts this command makes are written, one
    /// `<id>.json` each (`sluice lineage` reads them).
    #[arg(long = "lineage-dir", env = LINEAGE_DIR_ENV, default_value = LINEAGE_DIR)]
    pub lineage_dir: PathBuf,
}

#[derive(clap::Args, Clone, Debug)]
pub(crate) struct LineageArgs {
    /// An artefact's id (16 hex digits): show what it was made from, up to
    /// the first artefacts, and what was made from it. Without: all.
    id: Option<String>,
    /// Graphviz (`| dot -Tsvg`) instead of the tree.
    #[arg(long, conflicts_with = "json")]
    dot: bool,
    /// `{"root", "nodes", "edges", "missing"}` instead of the tree.
    #[arg(long)]
    json: bool,
    /// The artefact files' directory.
    #[arg(long, env = LINEAGE_DIR_ENV, default_value = LINEAGE_DIR)]
    dir: PathBuf,
    /// Also the live artefacts of this sluice's control API (the config,
    /// clusters, rollouts and their events), with `--token`.
    #[arg(long)]
    admin: Option<String>,
    #[command(flatten)]
    token: AdminToken,
}

/// What `sluice lineage` prints: `text` on stdout, `said` on stderr, and
/// its exit code.
#[derive(Debug, PartialEq)]
pub(crate) struct Shown {
    pub text: String,
    pub said: Vec<String>,
    pub code: u8,
}

impl Shown {
    fn refused(message: String) -> Shown {
        Shown {
            text: String::new(),
            said: vec![message],
            code: 2,
        }
    }
}

pub(crate) fn run(args: LineageArgs) -> anyhow::Result<ExitCode> {
    let shown = show(&args)?;
    for line in &shown.said {
        eprintln!("{line}");
    }
    let _ = std::io::stdout().lock().write_all(shown.text.as_bytes());
    Ok(ExitCode::from(shown.code))
}

/// The walk: exit 2 for an unknown or malformed id, 1 when a file could not
/// be read as an artefact (skipped, named with where it broke; the rest is
/// still shown).
pub(crate) fn show(args: &LineageArgs) -> anyhow::Result<Shown> {
    let root = match args.id.as_deref().map(ContentId::parse).transpose() {
        Ok(id) => id,
        Err(e) => return Ok(Shown::refused(format!("lineage: {e}"))),
    };
    let (mut artifacts, corrupt) =
        read_lineage_dir(&args.dir).with_context(|| args.dir.display().to_string())?;
    let mut said: Vec<String> = corrupt
        .iter()
        .map(|c| format!("lineage: skipped {c}"))
        .collect();
    if let Some(url) = &args.admin {
        artifacts.extend(live(url, &args.token)?);
    }
    let graph = LineageGraph::new(artifacts);
    let walk = match &root {
        Some(id) => match graph.walk(id) {
            Some(w) => w,
            None => {
                let from = match &args.admin {
                    Some(url) => format!("{} or {url}", args.dir.display()),
                    None => args.dir.display().to_string(),
                };
                said.push(format!(
                    "lineage: no artefact `{id}` in {from} ({} read)",
                    graph.len()
                ));
                return Ok(Shown {
                    text: String::new(),
                    said,
                    code: 2,
                });
            }
        },
        None => graph.all(),
    };
    let text = if args.json {
        format!("{:#}\n", walk.json())
    } else if args.dot {
        walk.dot()
    } else {
        walk.tree()
    };
    let code = if corrupt.is_empty() { 0 } else { 1 };
    Ok(Shown { text, said, code })
}

/// Every artefact `GET /v1/lineage` lists.
fn live(url: &str, token: &AdminToken) -> anyhow::Result<Vec<Artifact>> {
    let path = ApiEndpoint::ListLineage.path(&[]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (status, text) = runtime.block_on(ctl::call(url, token, "GET", &path, None))?;
    if !status.is_success() {
        anyhow::bail!("{url}{path}: {status}: {text}");
    }
    #[derive(serde::Deserialize)]
    struct Listed {
        artifacts: Vec<Artifact>,
    }
    let listed: Listed =
        serde_json::from_str(&text).with_context(|| format!("{url}{path}: not a lineage list"))?;
    Ok(listed.artifacts)
}

/// The scenario at `path` as an artefact, below its `from_model:` file
/// (relative to the scenario) when it has one: `[model?, scenario]`.
pub(crate) fn scenario_nodes(
    path: &Path,
    from_model: Option<&str>,
) -> anyhow::Result<Vec<Artifact>> {
    let label = |p: &Path| {
        p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    let mut made = Vec::new();
    if let Some(file) = from_model {
        let model_path = path.parent().unwrap_or(Path::new(".")).join(file);
        let text = std::fs::read_to_string(&model_path)
            .with_context(|| model_path.display().to_string())?;
        let model = model_artifact(&label(&model_path), &text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", model_path.display()))?;
        made.push(model);
    }
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    let model = made.first().map(|m: &Artifact| m.id.clone());
    let scenario = scenario_artifact(&label(path), &text, model)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    made.push(scenario);
    Ok(made)
}

/// Writes each of `made` to `dir`.
pub(crate) fn record(dir: &Path, made: &[Artifact]) -> anyhow::Result<()> {
    for a in made {
        write_artifact(dir, a).with_context(|| format!("--lineage-dir {}", dir.display()))?;
    }
    Ok(())
}

/// [`record`] after the result is written: a directory that cannot be
/// written is said on stderr (`verb: warning: ...`) and costs no result.
pub(crate) fn keep(verb: &str, dir: &Path, made: &[Artifact]) {
    if let Err(e) = record(dir, made) {
        eprintln!("{verb}: warning: lineage not kept: {e:#}");
    }
}

#[cfg(test)]
mod tests;
