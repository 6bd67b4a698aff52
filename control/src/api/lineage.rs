//! `/v1/lineage`: the control plane's own lineage artefacts, live — the
//! config, each cluster version under its dataset, checkpoint and prompt
//! template, each rollout under its clusters, and its events under it.

use http::StatusCode;
use serde::Serialize;
use sluice_filters::{Artifact, ContentId};

use super::respond::{self, ApiResponse};
use crate::lineage::config_artifacts;
use crate::rollout::Rollouts;
use crate::store::SnapshotStore;

#[derive(Serialize)]
struct Listed {
    artifacts: Vec<Artifact>,
}

fn all(store: &SnapshotStore, rollouts: &Rollouts) -> Vec<Artifact> {
    let snapshot = store.load();
    let mut made = config_artifacts(&snapshot.config);
    for a in rollouts.lineage(&snapshot.config) {
        if !made.iter().any(|m| m.id == a.id) {
            made.push(a);
        }
    }
    made
}

pub(super) fn list(store: &SnapshotStore, rollouts: &Rollouts) -> ApiResponse {
    respond::json(
        StatusCode::OK,
        &Listed {
            artifacts: all(store, rollouts),
        },
    )
}

/// 400 for what is not an id, 404 for an id nothing here has.
pub(super) fn show(store: &SnapshotStore, rollouts: &Rollouts, id: &str) -> ApiResponse {
    let id = match ContentId::parse(id) {
        Ok(id) => id,
        Err(e) => return respond::error_at(StatusCode::BAD_REQUEST, &e, "id"),
    };
    match all(store, rollouts).into_iter().find(|a| a.id == id) {
        Some(a) => respond::json(StatusCode::OK, &a),
        None => respond::error_at(
            StatusCode::NOT_FOUND,
            &format!("no lineage artefact `{id}` here"),
            "id",
        ),
    }
}
