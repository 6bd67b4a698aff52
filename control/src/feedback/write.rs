//! One scenario on disk: the manifest made from the breach and the window
//! cut out of the recorder's ring, and the two files written into a
//! temporary directory (each synced) that is then renamed into place, so a
//! reader sees a whole scenario or none.

use std::path::{Path, PathBuf};

use serde_json::json;
use sluice_filters::{
    cause_of, format_duration, format_rfc3339, initial_weight, is_error_status, Artifact,
    ArtifactKind, ContentId, FeedbackManifest, FeedbackTrigger, FeedbackWindow, FEEDBACK_MANIFEST,
    FEEDBACK_TRACE, FEEDBACK_VERSION,
};

use super::Breach;
use crate::config::FeedbackConfig;
use crate::recorder::Cut;
use crate::state::write_atomic;

/// What was written.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Written {
    pub id: ContentId,
    /// The scenario's directory.
    pub path: PathBuf,
    pub requests: u64,
}

/// The manifest of `breach` whose window holds `cut` (`recording`: a
/// recording was on at the breach), saved at `created_us`.
pub(crate) fn manifest(
    config: &FeedbackConfig,
    breach: &Breach,
    cut: &Cut,
    recording: bool,
    created_us: i64,
) -> FeedbackManifest {
    let statuses: Vec<Option<u16>> = cut.lines.iter().map(|k| k.status).collect();
    // A rollout's gates judge its canary: its requests give the rate when
    // there are any; a halt judges the whole route.
    let judged: Vec<Option<u16>> = match &breach.cluster {
        Some(c) if cut.lines.iter().any(|k| &k.cluster == c) => cut
            .lines
            .iter()
            .filter(|k| &k.cluster == c)
            .map(|k| k.status)
            .collect(),
        _ => statuses.clone(),
    };
    let errors = judged.iter().filter(|s| is_error_status(**s)).count() as u64;
    let error_rate = match judged.len() {
        0 => breach.error_rate_hint.unwrap_or(0.0).clamp(0.0, 1.0),
        n => errors as f64 / n as f64,
    };
    let cause = cause_of(breach.cache_cluster, &statuses);
    let half_life = config.half_lives.of(cause);
    let before = i64::try_from(config.before.as_micros()).unwrap_or(i64::MAX);
    let mut notes = Vec::new();
    if cut.lines.is_empty() {
        notes.push(match recording {
            true => format!(
                "the recorder kept no request of route `{}` in the window",
                breach.route
            ),
            false => "no recorder was on: the trace is empty".to_owned(),
        });
    }
    if cut.truncated {
        notes.push(
            "the window began before the oldest line the recorder still held: its start is missing"
                .to_owned(),
        );
    }
    // The inputs are what the scenario is of, never when or what it held.
    let inputs = json!({
        "kind": breach.kind.as_str(),
        "route": breach.route,
        "rollout": breach.rollout,
        "fault": breach.fault,
        "cluster": breach.cluster,
        "version": breach.version,
        "gate": breach.gate,
        "bound": breach.bound,
        "before": format_duration(config.before),
    });
    let label = match (&breach.rollout, &breach.fault) {
        (Some(r), _) => format!("{r}: {}", breach.kind.as_str()),
        (None, Some(f)) => format!("fault {f}: {}", breach.kind.as_str()),
        (None, None) => breach.kind.as_str().to_owned(),
    };
    let created = format_rfc3339(created_us);
    let artifact = Artifact::new(
        ArtifactKind::Feedback,
        label,
        inputs,
        breach.parents.clone(),
    )
    .with_attr("created", json!(created));
    FeedbackManifest {
        v: FEEDBACK_VERSION,
        id: artifact.id.clone(),
        trigger: FeedbackTrigger {
            kind: breach.kind,
            cause,
            gate: breach.gate.clone(),
            value: breach.value,
            bound: breach.bound,
            unit: breach.unit.clone(),
            reason: breach.reason.clone(),
        },
        route: breach.route.clone(),
        rollout: breach.rollout.clone(),
        fault: breach.fault.clone(),
        cluster: breach.cluster.clone(),
        version: breach.version.clone(),
        lineage: breach.lineage.clone(),
        window: FeedbackWindow {
            from: format_rfc3339(breach.at_us.saturating_sub(before)),
            to: format_rfc3339(breach.at_us),
        },
        requests: cut.lines.len() as u64,
        errors,
        error_rate,
        initial_weight: initial_weight(error_rate),
        half_life: format_duration(half_life),
        created,
        trace: FEEDBACK_TRACE.to_owned(),
        notes,
        artifact,
    }
}

/// Writes the scenario of `breach` under `config.dir`: `<id>/`, or
/// `<id>-2/`, `<id>-3/`, ... when an earlier scenario of the same inputs is
/// there (the same rollout event in another run, a fault id reused).
pub(crate) fn write_scenario(
    config: &FeedbackConfig,
    breach: &Breach,
    cut: Cut,
    recording: bool,
    created_us: i64,
) -> std::io::Result<Written> {
    let manifest = manifest(config, breach, &cut, recording, created_us);
    let mut trace = Vec::with_capacity(cut.lines.iter().map(|k| k.line.len() + 1).sum());
    for kept in &cut.lines {
        trace.extend_from_slice(&kept.line);
        trace.push(b'\n');
    }
    let text = serde_json::to_vec_pretty(&manifest).map_err(std::io::Error::other)?;
    let dir = &config.dir;
    let temp = dir.join(format!(".{}.tmp", manifest.id));
    if temp.exists() {
        std::fs::remove_dir_all(&temp)?;
    }
    std::fs::create_dir_all(&temp)?;
    write_atomic(&temp, FEEDBACK_TRACE, &trace)?;
    write_atomic(&temp, FEEDBACK_MANIFEST, &text)?;
    let path = free_name(dir, manifest.id.as_str());
    std::fs::rename(&temp, &path)?;
    sync(dir)?;
    Ok(Written {
        id: manifest.id,
        path,
        requests: manifest.requests,
    })
}

fn free_name(dir: &Path, id: &str) -> PathBuf {
    let first = dir.join(id);
    if !first.exists() {
        return first;
    }
    let mut n = 2;
    loop {
        let next = dir.join(format!("{id}-{n}"));
        if !next.exists() {
            return next;
        }
        n += 1;
    }
}

#[cfg(unix)]
fn sync(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync(_: &Path) -> std::io::Result<()> {
    Ok(())
}
