//! `/v1/load-runs`: the live summaries that `sluice load --report-to`
//! pushes (every 2 s and once at the end), kept in memory for the console:
//! the newest [`MAX_LOAD_RUNS`] runs, each replaced whole by its next push.

use std::collections::VecDeque;
use std::sync::Mutex;

use http::StatusCode;
use sluice_filters::LoadRun;

use super::respond::{self, ApiResponse};

/// Runs kept; a new run beyond it drops the one first reported longest ago.
pub const MAX_LOAD_RUNS: usize = 64;

/// The runs, newest (by first report) first. Written every 2 s per run at
/// most: a plain mutex, off the data plane.
#[derive(Debug, Default)]
pub struct LoadRuns {
    runs: Mutex<VecDeque<LoadRun>>,
}

impl LoadRuns {
    /// Stores `run`: replaces the run of the same id in place, or puts it
    /// first. True when it was new.
    pub fn put(&self, run: LoadRun) -> bool {
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = runs.iter_mut().find(|r| r.run_id == run.run_id) {
            *old = run;
            return false;
        }
        runs.push_front(run);
        runs.truncate(MAX_LOAD_RUNS);
        true
    }

    pub fn list(&self) -> Vec<LoadRun> {
        let runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        runs.iter().cloned().collect()
    }

    pub fn get(&self, id: &str) -> Option<LoadRun> {
        let runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        runs.iter().find(|r| r.run_id == id).cloned()
    }
}

#[derive(serde::Serialize)]
struct Listed {
    runs: Vec<LoadRun>,
}

pub(super) fn list(runs: &LoadRuns) -> ApiResponse {
    respond::json(StatusCode::OK, &Listed { runs: runs.list() })
}

pub(super) fn show(runs: &LoadRuns, id: &str) -> ApiResponse {
    match runs.get(id) {
        Some(run) => respond::json(StatusCode::OK, &run),
        None => respond::error_at(
            StatusCode::NOT_FOUND,
            &format!("unknown load run `{id}`"),
            "run_id",
        ),
    }
}

/// 201 for a new run, 200 for an update; 400 naming the first wrong
/// field (`{error, path}`).
pub(super) fn put(runs: &LoadRuns, body: &[u8]) -> ApiResponse {
    let mut de = serde_json::Deserializer::from_slice(body);
    let run: LoadRun = match serde_path_to_error::deserialize(&mut de) {
        Ok(run) => run,
        Err(e) => {
            let path = e.path().to_string();
            // The path names the place; serde's line and column add nothing.
            let message = e.into_inner().to_string();
            let message = message
                .rsplit_once(" at line ")
                .map_or(message.as_str(), |(m, _)| m);
            return respond::error_at(StatusCode::BAD_REQUEST, message, &path);
        }
    };
    if let Err(e) = run.check() {
        return respond::error_at(StatusCode::BAD_REQUEST, &e.message, &e.path);
    }
    let status = match runs.put(run.clone()) {
        true => StatusCode::CREATED,
        false => StatusCode::OK,
    };
    respond::json(status, &run)
}
