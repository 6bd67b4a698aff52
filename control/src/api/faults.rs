//! `/v1/faults`: list, add (the shape of one `faults:` item, YAML or JSON),
//! show and remove experiments. An experiment is part of the config, so
//! adding and removing go through the store: validated whole, swapped in
//! atomically, written to the audit log.

use std::time::Instant;

use http::StatusCode;
use serde::Serialize;

use super::respond::{self, ApiResponse};
use crate::config::{format_duration, ConfigError, ConfigErrors, RawFault};
use crate::fault::{new_fault_id, FaultRuntime, FaultState};
use crate::store::SnapshotStore;

#[derive(Serialize)]
struct FaultView<'a> {
    #[serde(flatten)]
    spec: &'a RawFault,
    kind: &'static str,
    state: FaultState,
    /// Faults injected so far.
    injected: u64,
    /// Requests (or connections) being faulted now.
    active_requests: u32,
    time_left_ms: u64,
    time_left: String,
}

#[derive(Serialize)]
struct FaultList<'a> {
    faults: Vec<FaultView<'a>>,
}

#[derive(Serialize)]
struct Removed<'a> {
    removed: &'a str,
    version: u64,
}

fn view<'a>(spec: &'a RawFault, runtime: &FaultRuntime, now: Instant) -> FaultView<'a> {
    let left = runtime.time_left_at(now);
    FaultView {
        spec,
        kind: runtime.experiment.action.name(),
        state: runtime.state_at(now),
        injected: runtime.injected(),
        active_requests: runtime.active(),
        time_left_ms: left.as_millis() as u64,
        time_left: format_duration(std::time::Duration::from_millis(left.as_millis() as u64)),
    }
}

pub(super) fn list(store: &SnapshotStore) -> ApiResponse {
    let snapshot = store.load();
    let now = tokio::time::Instant::now().into_std();
    let faults = snapshot
        .config
        .raw
        .faults
        .iter()
        .zip(&snapshot.faults)
        .map(|(spec, runtime)| view(spec, runtime, now))
        .collect();
    respond::json(StatusCode::OK, &FaultList { faults })
}

pub(super) fn show(store: &SnapshotStore, id: &str) -> ApiResponse {
    let snapshot = store.load();
    let found = snapshot
        .config
        .raw
        .faults
        .iter()
        .zip(&snapshot.faults)
        .find(|(spec, _)| spec.id.as_deref() == Some(id));
    match found {
        Some((spec, runtime)) => respond::json(
            StatusCode::OK,
            &view(spec, runtime, tokio::time::Instant::now().into_std()),
        ),
        None => unknown(id),
    }
}

/// 201 with the new experiment; 400 with every error (paths relative to the
/// experiment); 409 when the id is taken.
pub(super) fn add(store: &SnapshotStore, body: &[u8]) -> ApiResponse {
    let mut fault = match respond::parse_body(body, RawFault::from_yaml) {
        Ok(f) => f,
        Err(errors) => return respond::config_errors(&errors),
    };
    let id = fault.id.get_or_insert_with(new_fault_id).clone();
    let mut taken = false;
    let mut index = 0;
    let result = store.apply("api", &format!("add fault {id}"), |raw| {
        if raw
            .faults
            .iter()
            .any(|f| f.id.as_deref() == Some(id.as_str()))
        {
            taken = true;
            return Err(ConfigErrors(vec![ConfigError::new(
                "id",
                format!("fault `{id}` already exists"),
            )]));
        }
        index = raw.faults.len();
        raw.faults.push(fault);
        Ok(())
    });
    match result {
        Ok(_) => {
            let mut answer = show(store, &id);
            if answer.status() == StatusCode::OK {
                *answer.status_mut() = StatusCode::CREATED;
            }
            answer
        }
        Err(errors) if taken => respond::error_at(
            StatusCode::CONFLICT,
            &errors
                .0
                .first()
                .map_or(String::new(), |e| e.message.clone()),
            "id",
        ),
        Err(errors) => respond::config_errors(&errors.relative_to(&format!("faults[{index}]"))),
    }
}

pub(super) fn remove(store: &SnapshotStore, id: &str) -> ApiResponse {
    let mut missing = false;
    let result = store.apply("api", &format!("remove fault {id}"), |raw| {
        let before = raw.faults.len();
        raw.faults.retain(|f| f.id.as_deref() != Some(id));
        missing = raw.faults.len() == before;
        if missing {
            return Err(ConfigErrors(vec![ConfigError::new(
                "id",
                format!("unknown fault `{id}`"),
            )]));
        }
        Ok(())
    });
    match result {
        Ok(snapshot) => respond::json(
            StatusCode::OK,
            &Removed {
                removed: id,
                version: snapshot.version,
            },
        ),
        Err(_) if missing => unknown(id),
        Err(errors) => respond::config_errors(&errors),
    }
}

fn unknown(id: &str) -> ApiResponse {
    respond::error_at(
        StatusCode::NOT_FOUND,
        &format!("unknown fault `{id}`"),
        "id",
    )
}
