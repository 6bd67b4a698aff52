//! From the raw scenario to the typed one, collecting every problem with
//! its path.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use sluice_filters::{expand_env, parse_duration, parse_percent, Gate, GateUnit};

use super::dist::{read as read_dist, Kind};
use super::raw::{RawScenario, RawStep, RawValue};
use sluice_filters::{PathError, PathErrors};

use super::{Scenario, Sessions, Target, DEFAULT_MAX_IN_FLIGHT};

mod data;
mod grpc;
mod plan;
mod replay;
mod steps;
mod sweep;

pub(crate) use replay::step as recorded_step;
pub use replay::REPLAY_STEP;

pub(crate) use steps::collect_strings;

/// Problems, each with its path.
#[derive(Default)]
pub(crate) struct Errors(pub(crate) Vec<PathError>);

impl Errors {
    pub(crate) fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(PathError {
            path: path.into(),
            message: message.into(),
        });
    }

    /// `value`, or the error at `path`.
    pub(crate) fn check<T>(&mut self, path: &str, value: Result<T, String>) -> Option<T> {
        value.map_err(|e| self.add(path, e)).ok()
    }
}

pub(crate) fn validate(
    raw: RawScenario,
    dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Scenario, PathErrors> {
    let mut e = Errors::default();
    if raw.scenario.trim().is_empty() {
        e.add("scenario", "must be a name, found an empty one");
    }
    let target = target(&raw, dir, env, &mut e);
    let replaying = replay::file(&raw).is_some();
    let (plan, model, replay) = if replaying {
        let source = replay::read(&raw, dir, &mut e);
        let plan = plan::replay_plan(&raw.workload, &mut e);
        (Some(plan), plan::FromModel::default(), source)
    } else {
        let (plan, model) = plan::plan(&raw.workload, dir, &mut e);
        (plan, model, None)
    };
    let max_in_flight = match raw.workload.max_in_flight {
        None => DEFAULT_MAX_IN_FLIGHT,
        Some(0) => {
            e.add("workload.max_in_flight", "must be at least 1, found 0");
            1
        }
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
    };
    let sessions = raw.sessions.as_ref().and_then(|s| {
        let turns = e.check("sessions.turns", read_dist(&s.turns, Kind::Count));
        let think_time = match &s.think_time {
            None => Some(super::Dist::Fixed(0.0)),
            Some(t) => e.check("sessions.think_time", read_dist(t, Kind::Duration)),
        };
        Some(Sessions {
            turns: turns?,
            think_time: think_time?,
            carry_history: s.carry_history.unwrap_or(false),
        })
    });
    // The scenario's `sessions:` wins over the model's.
    let sessions = sessions.or(model.sessions);
    let data = data::data(&raw, dir, &mut e);
    let mut known: BTreeSet<String> = BTreeSet::new();
    // Every variable written, also one whose values are wrong: its own
    // error says what, without one more at each step that uses it.
    for name in raw.data.keys() {
        known.insert(name.clone());
        known.insert(format!("{name}_hash"));
    }
    // What setup steps extract: known to the setup steps, the steps and
    // the teardown.
    let mut hook_known: BTreeSet<String> = BTreeSet::new();
    extract_names(&raw.setup, "setup", &mut hook_known, &mut e);
    known.extend(hook_known.iter().cloned());
    // What steps extract from their answers (empty until they have run).
    let raw_steps = raw.steps.as_deref().unwrap_or_default();
    extract_names(raw_steps, "steps", &mut known, &mut e);
    let mut steps = match replaying {
        true => vec![replay::configured(raw.replay_step.as_ref(), &mut e)],
        false => {
            if raw.replay_step.is_some() {
                e.add(
                    "replay_step",
                    "is for a replay (`workload.replay`); give a step's settings in `steps`",
                );
            }
            steps::steps(raw_steps, dir, &known, &mut e)
        }
    };
    // A model's lengths give `max_tokens` (output) and `input_tokens` to
    // the llm steps that build their request from a prompt and set none;
    // when it gave both, its copula joins them.
    for s in &mut steps {
        if s.service != super::Service::Llm || !matches!(s.body, super::Body::Prompt(_)) {
            continue;
        }
        let output = s.max_tokens.is_none() && model.output_tokens.is_some();
        let input = s.input_tokens.is_none() && model.input_tokens.is_some();
        if output {
            s.max_tokens = model.output_tokens.clone();
        }
        if input {
            s.input_tokens = model.input_tokens.clone();
        }
        if output && input {
            s.token_rho = model.token_rho;
        }
    }
    let setup = steps::hooks(&raw.setup, "setup", dir, &hook_known, &mut e);
    let teardown = steps::hooks(&raw.teardown, "teardown", dir, &hook_known, &mut e);
    for (list, name) in [
        (raw_steps, "steps"),
        (&raw.setup[..], "setup"),
        (&raw.teardown[..], "teardown"),
    ] {
        redis_secrets(list, name, env, &mut e);
    }
    let context_sweep = raw
        .context_sweep
        .as_ref()
        .and_then(|c| sweep::sweep(c, &raw, &steps, &mut e));
    let plan = match (plan, context_sweep) {
        (Some(plan), Some(c)) => Some(sweep::staged(plan, c)),
        (plan, _) => plan,
    };
    let thresholds = thresholds(&raw.thresholds, "thresholds", &mut e);
    let cost = raw.cost.as_ref().and_then(|c| match c.validate("cost") {
        Ok(price) => Some(price),
        Err(errors) => {
            e.0.extend(errors.0);
            None
        }
    });
    match (e.0.is_empty(), target, plan) {
        (true, Some(target), Some(plan)) => Ok(Scenario {
            name: raw.scenario,
            target,
            plan,
            max_in_flight,
            sessions,
            steps,
            setup,
            teardown,
            data,
            thresholds,
            from_model: model.file,
            cost,
            replay,
            context_sweep,
        }),
        _ => Err(PathErrors(e.0)),
    }
}

/// The names that `extract` of `raw` (at `prefix`) makes, into `known`.
fn extract_names(raw: &[RawStep], prefix: &str, known: &mut BTreeSet<String>, e: &mut Errors) {
    for (i, step) in raw.iter().enumerate() {
        for name in step.extract.keys() {
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                e.add(
                    format!("{prefix}[{i}].extract.{name}"),
                    "a variable name is letters, digits and `_`",
                );
            }
            known.insert(name.clone());
        }
    }
}

/// Whether `url` is `http://host...` (with `https` named as not built).
pub(crate) fn check_url(url: &str) -> Result<(), String> {
    let ok = ["http://", "https://"].iter().any(|scheme| {
        url.strip_prefix(scheme)
            .is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'))
    });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "must be a URL like http://127.0.0.1:8080 or https://host, found `{url}`"
        ))
    }
}

fn target(
    raw: &RawScenario,
    dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    e: &mut Errors,
) -> Option<Target> {
    let url = raw.target.base_url.trim_end_matches('/');
    let ok = e.check("target.base_url", check_url(url)).is_some();
    let mut headers = Vec::new();
    for (name, value) in &raw.target.headers {
        match expand_env(value, env) {
            Ok(v) => headers.push((name.clone(), v)),
            Err(m) => e.add(format!("target.headers.{name}"), m),
        }
    }
    let ca_certs = match &raw.target.ca_file {
        None => Vec::new(),
        Some(file) => match super::super::client::read_ca_file(&dir.join(file)) {
            Ok(certs) => certs,
            Err(m) => {
                e.add("target.ca_file", format!("{file}: {m}"));
                Vec::new()
            }
        },
    };
    let max_connections = match raw.target.max_connections {
        Some(0) => {
            e.add("target.max_connections", "must be at least 1, found 0");
            None
        }
        n => n.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
    };
    ok.then(|| Target {
        base_url: url.to_owned(),
        headers,
        ca_certs,
        max_connections,
    })
}

/// Every `${VAR}` of a redis step's URL (its password, say) must be set;
/// the value stays out of the scenario and is read when the run connects.
fn redis_secrets(
    steps: &[RawStep],
    list: &str,
    env: &dyn Fn(&str) -> Option<String>,
    e: &mut Errors,
) {
    for (i, s) in steps.iter().enumerate() {
        let Some(t) = s.target.as_deref().filter(|_| s.service == "redis") else {
            continue;
        };
        if let Err(m) = expand_env(t, env) {
            e.add(format!("{list}[{i}].target"), m);
        }
    }
}

/// `thresholds:` of the run or (at `prefix`) of a step.
pub(crate) fn thresholds(
    raw: &BTreeMap<String, RawValue>,
    prefix: &str,
    e: &mut Errors,
) -> Vec<(Gate, f64)> {
    let mut out = Vec::new();
    for (name, value) in raw {
        let path = format!("{prefix}.{name}");
        let gate = match Gate::parse(name) {
            Ok(g) => g,
            Err(err) => {
                e.add(&path, err.to_string());
                continue;
            }
        };
        if !gate.measured_by_load() {
            let names: Vec<&str> = Gate::ALL
                .iter()
                .filter(|g| g.measured_by_load())
                .map(|g| g.as_str())
                .collect();
            e.add(
                &path,
                format!(
                    "`{name}` is not measured by a load client (use one of {})",
                    names.join(", ")
                ),
            );
            continue;
        }
        let bound = match (gate.unit(), value) {
            (GateUnit::Ms, RawValue::Text(t)) => {
                parse_duration(t).map(|d| d.as_secs_f64() * 1000.0)
            }
            (GateUnit::Ms, RawValue::Number(v)) => {
                Err(format!("`{v}` has no unit (use us, ms, s, m or h)"))
            }
            (GateUnit::Percent, RawValue::Text(t)) => parse_percent(t),
            (GateUnit::Percent, RawValue::Number(v)) => Ok(*v),
            _ => Err("must be a duration like 800ms or a percent like 1%".to_owned()),
        };
        let Some(bound) = e.check(&path, bound) else {
            continue;
        };
        if gate.unit() == GateUnit::Percent && !(0.0..=100.0).contains(&bound) {
            e.add(&path, format!("must be within 0..=100, found {bound}"));
        } else if gate.unit() == GateUnit::Ms && (bound.is_nan() || bound <= 0.0) {
            e.add(&path, "must be greater than 0");
        } else {
            out.push((gate, bound));
        }
    }
    out
}
