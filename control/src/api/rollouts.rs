//! `/v1/rollouts`: list, add (the shape of one `rollouts:` item, YAML or
//! JSON), show, remove, and the operator's pause, resume, promote, abort.

use http::StatusCode;
use serde::Serialize;

use super::respond::{self, ApiResponse};
use crate::config::RawRollout;
use crate::rollout::{Command, RolloutError, Rollouts};

#[derive(Serialize)]
struct Removed<'a> {
    removed: &'a str,
}

pub(super) fn list(rollouts: &Rollouts) -> ApiResponse {
    respond::json(StatusCode::OK, &rollouts.list())
}

/// 201 with the new rollout's status; 400 with every error (paths relative
/// to the rollout); 409 when the name is taken.
pub(super) fn add(rollouts: &Rollouts, body: &[u8]) -> ApiResponse {
    let raw = match respond::parse_body(body, RawRollout::from_yaml) {
        Ok(raw) => raw,
        Err(errors) => return respond::config_errors(&errors),
    };
    match rollouts.add(raw) {
        Ok(status) => respond::json(StatusCode::CREATED, &status),
        Err(e) => error(e),
    }
}

pub(super) fn show(rollouts: &Rollouts, name: &str) -> ApiResponse {
    match rollouts.status(name) {
        Ok(status) => respond::json(StatusCode::OK, &status),
        Err(e) => error(e),
    }
}

pub(super) fn remove(rollouts: &Rollouts, name: &str) -> ApiResponse {
    match rollouts.remove(name) {
        Ok(()) => respond::json(StatusCode::OK, &Removed { removed: name }),
        Err(e) => error(e),
    }
}

/// `action` is one of [`Command`]'s names (the router checks).
pub(super) fn command(rollouts: &Rollouts, name: &str, action: &str) -> ApiResponse {
    let command = match Command::parse(action) {
        Ok(command) => command,
        Err(e) => return respond::error(StatusCode::NOT_FOUND, &e.to_string()),
    };
    match rollouts.command(name, command) {
        Ok(status) => respond::json(StatusCode::OK, &status),
        Err(e) => error(e),
    }
}

fn error(e: RolloutError) -> ApiResponse {
    match &e {
        RolloutError::Unknown(_) => {
            respond::error_at(StatusCode::NOT_FOUND, &e.to_string(), "name")
        }
        RolloutError::Exists(_) | RolloutError::Finished(..) => {
            respond::error_at(StatusCode::CONFLICT, &e.to_string(), "name")
        }
        RolloutError::Invalid(errors) => respond::config_errors(errors),
        RolloutError::NotAllowed(message) => respond::error(StatusCode::CONFLICT, message),
    }
}
