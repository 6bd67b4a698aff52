//! The lineage artefacts of the load-testing half: a scenario and a model
//! file (their parsed content), a load run, a capacity run and a report
//! (what they were asked to do, below what they read), the files that
//! store them (`store`) and the walk over them (`graph`). The builders are
//! pure; an id never covers results, times or file paths.

mod graph;
mod store;

use serde_json::{json, Value};
use sluice_filters::{Artifact, ArtifactKind, ContentId};

use crate::load::RunReport;

pub use graph::{Graph, Walk};
pub use store::{read_dir, write_artifact, Corrupt, LINEAGE_DIR, LINEAGE_DIR_ENV};

/// A scenario file as an artefact. `text` is the file's YAML: it is parsed
/// and its value identified, so comments, key order and spacing do not
/// change the id. `model` is the id of its `from_model:` file, if any.
/// Header values are kept as written (`${VAR}` unexpanded): secrets never
/// reach an artefact.
pub fn scenario_artifact(
    label: &str,
    text: &str,
    model: Option<ContentId>,
) -> Result<Artifact, String> {
    let content = parse_yaml(text)?;
    Ok(Artifact::new(
        ArtifactKind::Scenario,
        label,
        json!({"content": content}),
        model.into_iter().collect(),
    ))
}

/// A model file of `sluice fit -o` as an artefact, by its parsed content.
pub fn model_artifact(label: &str, text: &str) -> Result<Artifact, String> {
    let content = parse_yaml(text)?;
    Ok(Artifact::new(
        ArtifactKind::Model,
        label,
        json!({"content": content}),
        Vec::new(),
    ))
}

fn parse_yaml(text: &str) -> Result<Value, String> {
    serde_norway::from_str::<Value>(text).map_err(|e| e.to_string())
}

/// A load run: what was sent where, never what came back or when.
///
/// Inputs: the scenario's id, the target's base URL, the seed, the shard,
/// the mode (`open`, or `closed` with its users) and, for a replay, the
/// trace's SHA-256 with the flags that select and pace it. Parents: the
/// scenario, every cluster version a sluice target named on its answers
/// (`seen[].lineage_id`: the model the run measured) and `extra` (say, the
/// feedback artefacts it mixed in).
pub fn run_artifact(run: &RunReport, scenario: &ContentId, extra: Vec<ContentId>) -> Artifact {
    let replay = run.replay.as_ref().map(|r| {
        json!({
            "trace_sha256": r.trace_sha256,
            "speed": r.speed,
            "from": r.from,
            "to": r.to,
            "sample": r.sample,
        })
    });
    let inputs = json!({
        "scenario": scenario,
        "target": run.lineage.target,
        "seed": run.seed,
        "shard": run.shard,
        "mode": run.mode,
        "users": run.users,
        "replay": replay,
    });
    let mut parents = vec![scenario.clone()];
    parents.extend(
        run.seen
            .iter()
            .filter_map(|s| s.lineage_id.as_deref())
            .filter_map(|id| ContentId::parse(id).ok()),
    );
    parents.extend(extra);
    Artifact::new(ArtifactKind::LoadRun, run.scenario.clone(), inputs, parents)
}

/// A capacity run: the scenario, target and seed it drove, and the search
/// it was asked for (`search`: the SLAs, weights, bounds and the stage
/// lengths and rates, as the caller has them). Parents: the scenario and
/// the cluster versions that answered.
pub fn capacity_artifact(
    label: &str,
    scenario: &ContentId,
    target: &str,
    seed: u64,
    search: Value,
    answered: Vec<ContentId>,
) -> Artifact {
    let inputs = json!({
        "scenario": scenario,
        "target": target,
        "seed": seed,
        "search": search,
    });
    let mut parents = vec![scenario.clone()];
    parents.extend(answered);
    Artifact::new(ArtifactKind::CapacityRun, label, inputs, parents)
}

/// A report: the run it shows and the baseline it compares with (their
/// ids, also its parents), and the options that change what it says
/// (`options`: the headline metrics, the noise floor, the fit drawn).
pub fn report_artifact(
    label: &str,
    run: Option<&ContentId>,
    baseline: Option<&ContentId>,
    options: Value,
) -> Artifact {
    let inputs = json!({
        "run": run,
        "baseline": baseline,
        "options": options,
    });
    let parents = run.into_iter().chain(baseline).cloned().collect();
    Artifact::new(ArtifactKind::Report, label, inputs, parents)
}

#[cfg(test)]
mod tests;
