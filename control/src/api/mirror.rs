//! Shadow traffic in the API: `GET /v1/mirror/diffs` (the recent differing
//! pairs), `PUT /v1/routes/{route}/mirror` (set a route's policy),
//! `DELETE /v1/routes/{route}/mirror` (stop mirroring) and
//! `GET /v1/routes/{route}/mirror/embedding-baseline` (the drift baseline,
//! as the file `compare.embeddings.baseline` reads). Changes go through the
//! store like any other.

use http::StatusCode;
use serde::Serialize;

use super::respond::{self, ApiResponse};
use super::v1::{edit_route, has_route, unknown_route, RouteEdit};
use crate::config::RawMirror;
use crate::mirror::{DiffRecord, MirrorDiffs, DIFF_CAPACITY};
use crate::store::SnapshotStore;
use sluice_filters::SavedBaseline;

#[derive(Serialize)]
struct DiffsView {
    capacity: usize,
    /// Pairs ever recorded; the oldest fall off the ring.
    total: u64,
    /// Newest first.
    diffs: Vec<DiffRecord>,
}

#[derive(Serialize)]
struct MirrorSet<'a> {
    route: &'a str,
    mirror: Option<&'a RawMirror>,
    version: u64,
}

pub(super) fn get_diffs(mirror_diffs: &MirrorDiffs) -> ApiResponse {
    let (diffs, total) = mirror_diffs.list();
    respond::json(
        StatusCode::OK,
        &DiffsView {
            capacity: DIFF_CAPACITY,
            total,
            diffs,
        },
    )
}

/// Sets (`Some`) or removes (`None`) a route's mirror policy. A body that
/// does not parse is refused with paths relative to it; a policy that does
/// not validate, with its full path in the config.
pub(super) fn put(store: &SnapshotStore, route: &str, body: Option<&[u8]>) -> ApiResponse {
    if !has_route(store, route) {
        return unknown_route(route);
    }
    let mirror = match body {
        None => None,
        Some(bytes) => match respond::parse_body(bytes, RawMirror::from_yaml) {
            Ok(m) => Some(m),
            Err(errors) => return respond::config_errors(&errors),
        },
    };
    let action = match mirror {
        Some(_) => format!("set mirror of route {route}"),
        None => format!("remove mirror of route {route}"),
    };
    match edit_route(store, &action, route, |r| r.mirror = mirror) {
        Ok(snapshot) => {
            let mirror = snapshot
                .config
                .raw
                .route(route)
                .and_then(|r| r.mirror.as_ref());
            respond::json(
                StatusCode::OK,
                &MirrorSet {
                    route,
                    mirror,
                    version: snapshot.version,
                },
            )
        }
        Err(RouteEdit::Vanished) => unknown_route(route),
        Err(RouteEdit::Invalid(errors)) => respond::config_errors(&errors),
    }
}

/// The route's drift baseline as a saved-baseline file: its first `window`
/// pairs (or the saved baseline it was given). 404 for a route that does
/// not compare embeddings; 409 while the baseline is not whole yet.
pub(super) fn get_baseline(store: &SnapshotStore, route: &str) -> ApiResponse {
    let snapshot = store.load();
    let Some(r) = snapshot.route(route) else {
        return unknown_route(route);
    };
    let Some(mirror) = r
        .mirror
        .as_ref()
        .filter(|m| m.config.compare.embeddings.is_some())
    else {
        return respond::error_at(
            StatusCode::NOT_FOUND,
            &format!("route `{route}` has no mirror with compare.embeddings"),
            "route",
        );
    };
    let drift = mirror.lock_drift();
    match drift.window.baseline() {
        Some(similarities) => respond::json(
            StatusCode::OK,
            &SavedBaseline::new(route, similarities.to_vec()),
        ),
        None => {
            let (pairs, needed) = drift.window.baseline_progress();
            respond::error(
                StatusCode::CONFLICT,
                &format!(
                    "the baseline of route `{route}` has {pairs} of its {needed} pairs so far; save it once it is whole"
                ),
            )
        }
    }
}
