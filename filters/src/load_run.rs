//! The live summary of a `sluice load` run, as `--report-to` pushes it to a
//! control API (`POST /v1/load-runs`) and the API stores and lists it. It
//! lives here, pure, so that `control` stores what `workload` measures
//! without depending on it. Read strictly: unknown fields are refused and
//! [`LoadRun::check`] names the first wrong field.

use serde::{Deserialize, Serialize};

use crate::{parse_wall_clock, PathError};

// The run id is the one of `x-sluice-load` (`crate::load::run_id`): a
// path segment of `/v1/load-runs/{id}` too.
use crate::load::MAX_RUN_ID;

/// Where a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadRunState {
    Running,
    Done,
    /// Stopped early (Ctrl-C): what it reports is partial.
    Interrupted,
}

/// One threshold as judged so far (on the requests measured until
/// `updated_at`; when done, the run's final verdict).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadRunThreshold {
    /// The gate's name (`ttft_p95`).
    pub name: String,
    /// A step's own threshold; absent for the run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// In the gate's unit (ms, or percent).
    pub bound: f64,
    /// `None`: not measured yet.
    pub value: Option<f64>,
    pub passed: bool,
}

/// What one run reports, replaced whole by each push.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadRun {
    pub run_id: String,
    pub scenario: String,
    pub state: LoadRunState,
    /// `i/n` of a sharded run.
    pub shard: String,
    /// `open`, or `closed` (`--closed N`).
    pub mode: String,
    /// The stage the schedule is in (from 0); `None` past its end.
    pub stage: Option<usize>,
    pub stages: usize,
    /// Arrivals per second the schedule asks for now (this shard's);
    /// `None` in a closed loop.
    pub offered_rate: Option<f64>,
    /// Journeys ended per second over the last interval.
    pub achieved_rate: f64,
    pub sent: u64,
    pub done: u64,
    pub failed: u64,
    pub in_flight: u64,
    /// Requests that ever waited for a `max_in_flight` slot.
    pub queued: u64,
    /// Of the measured requests (warm-up left out), from the intended start.
    pub ttft_p95_ms: Option<f64>,
    /// Percent of the measured requests that failed, 429s left out.
    pub error_rate: Option<f64>,
    pub thresholds: Vec<LoadRunThreshold>,
    /// Every threshold holds so far.
    pub passed: bool,
    pub elapsed_s: f64,
    /// The schedule's length.
    pub duration_s: f64,
    /// RFC 3339.
    pub started_at: String,
    pub updated_at: String,
}

impl LoadRun {
    /// The first field whose value is wrong, by its path.
    pub fn check(&self) -> Result<(), PathError> {
        let bad = |path: &str, message: String| PathError {
            path: path.to_owned(),
            message,
        };
        if crate::load::run_id(self.run_id.as_bytes()).is_none() {
            return Err(bad(
                "run_id",
                format!(
                    "must be 1 to {MAX_RUN_ID} letters, digits, `.`, `_`, `:` or `-`, found `{}`",
                    self.run_id
                ),
            ));
        }
        for (path, at) in [
            ("started_at", &self.started_at),
            ("updated_at", &self.updated_at),
        ] {
            parse_wall_clock(at).map_err(|e| bad(path, e))?;
        }
        let rates = [
            ("offered_rate", self.offered_rate),
            ("achieved_rate", Some(self.achieved_rate)),
            ("ttft_p95_ms", self.ttft_p95_ms),
            ("elapsed_s", Some(self.elapsed_s)),
            ("duration_s", Some(self.duration_s)),
        ];
        for (path, v) in rates {
            if let Some(v) = v.filter(|v| !v.is_finite() || *v < 0.0) {
                return Err(bad(path, format!("must be a number >= 0, found {v}")));
            }
        }
        if let Some(v) = self
            .error_rate
            .filter(|v| !(0.0..=100.0).contains(v) || v.is_nan())
        {
            return Err(bad(
                "error_rate",
                format!("must be a percent within 0..=100, found {v}"),
            ));
        }
        if let Some(stage) = self.stage.filter(|s| *s >= self.stages.max(1)) {
            return Err(bad(
                "stage",
                format!("must be below `stages` ({}), found {stage}", self.stages),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn sample() -> LoadRun {
        LoadRun {
            run_id: "load-00000000000000ab".into(),
            scenario: "chat".into(),
            state: LoadRunState::Running,
            shard: "0/1".into(),
            mode: "open".into(),
            stage: Some(0),
            stages: 2,
            offered_rate: Some(20.0),
            achieved_rate: 19.5,
            sent: 40,
            done: 38,
            failed: 1,
            in_flight: 2,
            queued: 0,
            ttft_p95_ms: Some(41.0),
            error_rate: Some(2.6),
            thresholds: vec![LoadRunThreshold {
                name: "ttft_p95".into(),
                step: None,
                bound: 800.0,
                value: Some(41.0),
                passed: true,
            }],
            passed: true,
            elapsed_s: 2.0,
            duration_s: 10.0,
            started_at: "2026-12-03T08:00:00Z".into(),
            updated_at: "2026-12-03T08:00:02Z".into(),
        }
    }

    #[test]
    fn a_run_round_trips_through_json_with_snake_case_states() {
        let run = sample();
        let text = serde_json::to_string(&run).unwrap();
        assert!(text.contains(r#""state":"running""#), "{text}");
        assert!(!text.contains("\"step\""), "{text}");
        let back: LoadRun = serde_json::from_str(&text).unwrap();
        assert_eq!(back, run);
        assert_eq!(back.check(), Ok(()));
    }

    #[test]
    fn unknown_fields_are_refused() {
        let mut value = serde_json::to_value(sample()).unwrap();
        value["colour"] = "blue".into();
        let e = serde_json::from_value::<LoadRun>(value).unwrap_err();
        assert!(e.to_string().starts_with("unknown field `colour`"), "{e}");
    }

    #[test]
    fn check_names_the_wrong_field() {
        type Edit = fn(&mut LoadRun);
        let cases: [(Edit, &str); 6] = [
            (
                |r| r.run_id = "a/b".into(),
                "run_id: must be 1 to 64 letters, digits, `.`, `_`, `:` or `-`, found `a/b`",
            ),
            (
                |r| r.run_id = String::new(),
                "run_id: must be 1 to 64 letters, digits, `.`, `_`, `:` or `-`, found ``",
            ),
            (
                |r| r.updated_at = "yesterday".into(),
                "updated_at: `yesterday` is not a timestamp (expected YYYY-MM-DD HH:MM:SS)",
            ),
            (
                |r| r.achieved_rate = -1.0,
                "achieved_rate: must be a number >= 0, found -1",
            ),
            (
                |r| r.error_rate = Some(101.0),
                "error_rate: must be a percent within 0..=100, found 101",
            ),
            (
                |r| r.stage = Some(2),
                "stage: must be below `stages` (2), found 2",
            ),
        ];
        for (edit, want) in cases {
            let mut run = sample();
            edit(&mut run);
            assert_eq!(run.check().unwrap_err().to_string(), want);
        }
    }
}
