//! `/v1/rollouts`: list, add (the shape of one `rollouts:` item, YAML or
//! JSON), show, remove, and the operator's pause, resume, promote, abort.

use http::StatusCode;
use serde::Serialize;

use super::respond::{self, ApiResponse};
use crate::config::{ConfigErrors, RawRollout};
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
    match parse(body) {
        Ok(raw) => add_parsed(rollouts, raw),
        Err(errors) => respond::config_errors(&errors),
    }
}

/// The body of `POST /v1/rollouts` read (on a blocking worker: see
/// [`super::AdminApi::handle`]).
pub(super) fn parse(body: &[u8]) -> Result<RawRollout, ConfigErrors> {
    respond::parse_body(body, RawRollout::from_yaml)
}

/// Adds a parsed rollout. Called on the control thread, beside the
/// controllers: the status answered is the rollout's before its first step.
pub(super) fn add_parsed(rollouts: &Rollouts, raw: RawRollout) -> ApiResponse {
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
