//! `/v1/faults`: list, add (the shape of one `faults:` item, YAML or JSON),
//! show and remove experiments. An experiment is part of the config, so
//! adding and removing go through the store's one apply path: the new
//! experiment validated alone against the live config, swapped in
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

/// Why an experiment was not added, besides errors in it.
enum Refused {
    Taken,
    AtLimit(usize),
}

/// 201 with the new experiment; 400 with every error (paths relative to the
/// experiment); 409 when the id is taken or `runtime.max_experiments` are
/// listed already. Only the new experiment is validated (the others were).
pub(super) fn add(store: &SnapshotStore, body: &[u8]) -> ApiResponse {
    let mut fault = match respond::parse_body(body, RawFault::from_yaml) {
        Ok(f) => f,
        Err(errors) => return respond::config_errors(&errors),
    };
    let id = fault.id.get_or_insert_with(new_fault_id).clone();
    let mut refused = None;
    let mut index = 0;
    let result = store.apply_config("api", &format!("add fault {id}"), |config| {
        let max = config.runtime.max_experiments;
        if config.raw.faults.iter().any(|f| f.id.as_ref() == Some(&id)) {
            refused = Some(Refused::Taken);
            return Err(ConfigErrors(vec![ConfigError::new(
                "id",
                format!("fault `{id}` already exists"),
            )]));
        }
        if config.raw.faults.len() >= max {
            refused = Some(Refused::AtLimit(max));
            return Err(ConfigErrors(vec![ConfigError::new(
                "faults",
                format!("at the limit of {max} experiments (runtime.max_experiments)"),
            )]));
        }
        index = config.raw.faults.len();
        config.with_fault(fault)
    });
    match (result, refused) {
        (Ok(_), _) => {
            let mut answer = show(store, &id);
            if answer.status() == StatusCode::OK {
                *answer.status_mut() = StatusCode::CREATED;
            }
            answer
        }
        (Err(_), Some(Refused::Taken)) => respond::error_at(
            StatusCode::CONFLICT,
            &format!("fault `{id}` already exists"),
            "id",
        ),
        (Err(_), Some(Refused::AtLimit(max))) => respond::error_at(
            StatusCode::CONFLICT,
            &format!(
                "{max} fault experiments are listed, the limit (runtime.max_experiments); \
                 remove one first"
            ),
            "faults",
        ),
        (Err(errors), None) => {
            respond::config_errors(&errors.relative_to(&format!("faults[{index}]")))
        }
    }
}

pub(super) fn remove(store: &SnapshotStore, id: &str) -> ApiResponse {
    let mut missing = false;
    let result = store.apply_config("api", &format!("remove fault {id}"), |config| {
        config.without_fault(id).ok_or_else(|| {
            missing = true;
            ConfigErrors(vec![ConfigError::new(
                "id",
                format!("unknown fault `{id}`"),
            )])
        })
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
