//! `sluice load`'s replay flags (`--speed`, `--from`, `--to`, `--sample`):
//! valid with a replay scenario alone; they make the recording's plan.

use std::path::Path;

use sluice_workload::{sha256_file, Bound, Replay, ReplayOptions, ReplayRun, Scenario};

/// The flags of a replay scenario (`--speed`, `--from`, `--to`, `--sample`).
#[derive(Clone, Debug, Default)]
pub(crate) struct ReplayArgs {
    pub(crate) speed: Option<f64>,
    pub(crate) from: Option<String>,
    pub(crate) to: Option<String>,
    pub(crate) sample: Option<f64>,
}

impl ReplayArgs {
    /// The flags given, as the command line spells them.
    fn given(&self) -> Vec<&'static str> {
        [
            ("--speed", self.speed.is_some()),
            ("--from", self.from.is_some()),
            ("--to", self.to.is_some()),
            ("--sample", self.sample.is_some()),
        ]
        .into_iter()
        .filter_map(|(f, g)| g.then_some(f))
        .collect()
    }
}

/// A replay's plan and what the result says of it.
pub(crate) struct Planned {
    pub(crate) replay: Replay,
    pub(crate) run: ReplayRun,
}

/// `Ok(None)` for a scenario that is no replay (when no replay flag is
/// given); every problem as a line naming the flag or the file.
pub(crate) fn plan(
    scenario: &Scenario,
    file: &Path,
    args: &ReplayArgs,
    closed: Option<usize>,
) -> Result<Option<Planned>, Vec<String>> {
    let Some(source) = &scenario.replay else {
        let errors: Vec<String> = args
            .given()
            .into_iter()
            .map(|flag| {
                format!("{flag}: needs a replay scenario (`workload: {{ replay: trace.jsonl }}`)")
            })
            .collect();
        return if errors.is_empty() {
            Ok(None)
        } else {
            Err(errors)
        };
    };
    let mut errors = Vec::new();
    if closed.is_some() {
        errors.push("--closed: a replay keeps the recorded times; it runs open loop only".into());
    }
    let mut bound = |flag: &str, text: &Option<String>| {
        text.as_deref().and_then(|t| {
            Bound::parse(t)
                .map_err(|e| errors.push(format!("{flag}: {e}")))
                .ok()
        })
    };
    let (from, to) = (bound("--from", &args.from), bound("--to", &args.to));
    if !errors.is_empty() {
        return Err(errors);
    }
    let options = ReplayOptions {
        speed: args.speed.unwrap_or(1.0),
        from,
        to,
        sample: args.sample,
    };
    let trace = file.parent().unwrap_or(Path::new(".")).join(&source.file);
    let replay = source
        .recording
        .plan(&options, scenario.plan.seed)
        .map_err(|e| match e.starts_with("--") {
            true => vec![e],
            false => vec![format!("{}: {e}", trace.display())],
        })?
        .with_warmup(scenario.plan.warmup);
    let trace_sha256 =
        sha256_file(&trace).map_err(|e| vec![format!("{}: {e}", trace.display())])?;
    let run = ReplayRun {
        file: source.file.clone(),
        trace_sha256,
        speed: options.speed,
        from: args.from.clone(),
        to: args.to.clone(),
        sample: args.sample,
        recorded_requests: source.recording.requests.len(),
        planned_requests: replay.journeys.iter().map(Vec::len).sum(),
        planned_journeys: replay.journeys.len(),
    };
    Ok(Some(Planned { replay, run }))
}
