//! `/v1/recorder`: see the running recording, start one (the shape of the
//! config's `recorder:`, with a required `ttl`) and stop it. A recording
//! started here is not written into the config: it ends at its ttl, at a
//! `DELETE`, or when a config change starts the config's own.

use http::StatusCode;
use serde::Serialize;

use super::respond::{self, ApiResponse};
use crate::config::{ConfigError, ConfigErrors, RawRecorder};
use crate::events::EventLog;
use crate::recorder::{CaptureStatus, Recorder, Source};
use crate::store::SnapshotStore;

#[derive(Serialize)]
struct View {
    recording: bool,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    status: Option<CaptureStatus>,
}

pub(super) fn get(recorder: &Recorder) -> ApiResponse {
    let status = recorder.current().map(|c| c.status());
    respond::json(
        StatusCode::OK,
        &View {
            recording: status.is_some(),
            status,
        },
    )
}

/// 201 with the new recording's status; 400 with every error of the body
/// (paths relative to it); 500 when its file cannot be opened.
pub(super) fn put(
    recorder: &Recorder,
    store: &SnapshotStore,
    events: &EventLog,
    body: &[u8],
) -> ApiResponse {
    let raw = match respond::parse_body(body, RawRecorder::from_yaml) {
        Ok(r) => r,
        Err(errors) => return respond::config_errors(&errors),
    };
    let snapshot = store.load();
    let config = match raw.validate(&snapshot.config.routes) {
        Ok(c) if c.ttl.is_none() => {
            return respond::config_errors(&ConfigErrors(vec![ConfigError::new(
                "ttl",
                "is required: how long the recording runs, like 10m",
            )]))
        }
        Ok(c) => c,
        Err(errors) => return respond::config_errors(&errors),
    };
    let action = format!("start recorder {}", config.path.display());
    match recorder.start(config, Source::Api) {
        Ok(status) => {
            events.push("api", &action, snapshot.version, Vec::new());
            respond::json(
                StatusCode::CREATED,
                &View {
                    recording: true,
                    status: Some(status),
                },
            )
        }
        Err(e) => {
            events.push("api", &action, snapshot.version, vec![e.to_string()]);
            respond::error_at(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), e.field())
        }
    }
}

/// 200 with the stopped recording's final counts (its files are closed);
/// 404 when none runs.
pub(super) fn delete(recorder: &Recorder, store: &SnapshotStore, events: &EventLog) -> ApiResponse {
    match recorder.stop() {
        Some(status) => {
            events.push("api", "stop recorder", store.load().version, Vec::new());
            respond::json(
                StatusCode::OK,
                &View {
                    recording: false,
                    status: Some(status),
                },
            )
        }
        None => respond::error(StatusCode::NOT_FOUND, "no recording is running"),
    }
}
