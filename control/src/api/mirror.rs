//! Shadow traffic in the API: `GET /v1/mirror/diffs` (the recent differing
//! pairs), `PUT /v1/routes/{route}/mirror` (set a route's policy) and
//! `DELETE /v1/routes/{route}/mirror` (stop mirroring). Changes go through
//! the store like any other.

use http::StatusCode;
use serde::Serialize;

use super::respond::{self, ApiResponse};
use super::v1::{edit_route, has_route, unknown_route, RouteEdit};
use crate::config::RawMirror;
use crate::mirror::{DiffRecord, MirrorDiffs, DIFF_CAPACITY};
use crate::store::SnapshotStore;

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
