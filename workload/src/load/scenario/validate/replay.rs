//! `workload: { replay: trace.jsonl }` (or `arrival: { kind: trace, file }`):
//! the trace read whole with the trace readers (any format `sluice trace
//! stats` reads), and what a replay refuses: keys that would shape load the
//! recording already shapes. It sends the recorded requests as one implicit
//! step, [`REPLAY_STEP`].

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use super::super::raw::{RawReplayStep, RawScenario};
use super::super::{Body, ReplaySource, Service, Step, Template, DEFAULT_TIMEOUT};
use super::Errors;
use crate::load::replay::Recording;
use crate::trace::TraceReader;

/// The name of a replay's one step: every recorded request is reported
/// under it (and by stage, all in stage 0).
pub const REPLAY_STEP: &str = "replay";

/// The trace file a scenario replays and the path that names it, if any.
pub(super) fn file(raw: &RawScenario) -> Option<(&'static str, &str)> {
    let w = &raw.workload;
    match (&w.replay, &w.arrival) {
        (Some(f), _) => Some(("workload.replay", f.as_str())),
        (None, Some(a)) if a.kind == "trace" => {
            a.file.as_deref().map(|f| ("workload.arrival.file", f))
        }
        _ => None,
    }
}

/// The recording, and every key that does not go with a replay named.
pub(super) fn read(raw: &RawScenario, dir: &Path, e: &mut Errors) -> Option<ReplaySource> {
    let (at, name) = file(raw)?;
    let w = &raw.workload;
    if w.replay.is_some() && (w.arrival.is_some() || w.from_model.is_some()) {
        e.add(
            "workload",
            "give one of `arrival`, `from_model` and `replay`",
        );
    }
    if let Some(a) = w.arrival.as_ref().filter(|a| a.kind == "trace") {
        let given = super::plan::given(a);
        if given != ["file"] {
            e.add(
                "workload.arrival",
                format!("`trace` takes file alone, found {}", given.join(", ")),
            );
        }
    }
    let times = "a replay keeps the recorded times (window them with --from and --to)";
    if w.duration.is_some() {
        e.add("workload.duration", times);
    }
    if w.stages.is_some() {
        e.add("workload.stages", times);
    }
    if raw.sessions.is_some() {
        e.add("sessions", "a replay keeps the recorded sessions");
    }
    if raw.steps.is_some() {
        e.add(
            "steps",
            format!(
                "a replay sends the recorded requests (as the one step `{REPLAY_STEP}`): \
                 leave `steps` out"
            ),
        );
    }
    if !raw.data.is_empty() {
        e.add(
            "data",
            "a replay sends the recorded bodies: no step reads `data`",
        );
    }
    let recording = File::open(dir.join(name))
        .map_err(|err| format!("{name}: {err}"))
        .and_then(|f| recording(name, f));
    let recording = e.check(at, recording)?;
    Some(ReplaySource {
        file: name.to_owned(),
        recording,
    })
}

/// Every row of the trace, or the first bad one as `file:line: what`.
fn recording(name: &str, file: File) -> Result<Recording, String> {
    let reader = TraceReader::new(name, BufReader::new(file), None).map_err(|e| e.to_string())?;
    let lines = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    Recording::from_lines(lines).map_err(|m| format!("{name}: {m}"))
}

/// The one step of a replay as `replay_step:` sets it: the timeout and the
/// thresholds of every recorded request, and the `model` and `ignore_eos`
/// of the chat completions it builds for rows without a body.
pub(super) fn configured(raw: Option<&RawReplayStep>, e: &mut Errors) -> Step {
    let mut step = step();
    let Some(raw) = raw else {
        return step;
    };
    step.timeout = super::steps::timeout_at(raw.timeout.as_deref(), "replay_step.timeout", e);
    step.thresholds = super::thresholds(&raw.thresholds, "replay_step.thresholds", e);
    if raw.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
        e.add(
            "replay_step.model",
            "must be a model name, found an empty one",
        );
    }
    step.model = raw.model.clone();
    step.ignore_eos = raw.ignore_eos.unwrap_or(false);
    step
}

/// The one step of a replay: each request's method, path and body are the
/// recorded ones; the step gives the timeout (the default) and the name.
pub(crate) fn step() -> Step {
    Step {
        name: REPLAY_STEP.to_owned(),
        service: Service::Llm,
        method: "POST".to_owned(),
        path: Template::default(),
        headers: Vec::new(),
        body: Body::None,
        depends_on: Vec::new(),
        delay: None,
        model: None,
        max_tokens: None,
        input_tokens: None,
        shared_prefix: false,
        token_rho: None,
        stream: false,
        timeout: DEFAULT_TIMEOUT,
        thresholds: Vec::new(),
        when: None,
        ignore_eos: false,
        extract: Vec::new(),
        target: None,
        command: Vec::new(),
        keep_text: false,
        perturb: None,
    }
}
