//! `sluice ctl rollout ...`: the requests, and a rollout's status as a
//! table (`list`), a page (`show`) and the gate readings `watch` redraws.

use clap::Subcommand;
use serde_json::Value;
use sluice_control::{ApiEndpoint, Command};
use sluice_filters::Gate;

use super::table::{Cell, Table};
use super::view::{decimals, text, time};
use super::watch::WatchArgs;
use super::{call_to, read_file, Call};

#[derive(Subcommand)]
pub(super) enum RolloutCommand {
    /// Every rollout: state, step, weight, last gate readings.
    List,
    /// One rollout with its gates and the history of its transitions.
    Show { name: String },
    /// Redraw a rollout's state until it ends: exit 0 when promoted, 1 when
    /// rolled back or aborted, 2 when it does not exist or the API cannot be
    /// reached. On a terminal the page is redrawn in place; piped, a line
    /// per change; with --json, the API's answer per change, one a line.
    Watch(WatchArgs),
    /// Add and start a rollout from a YAML or JSON file (one `rollouts:` item).
    Start { file: std::path::PathBuf },
    /// Hold the canary's weight where it is.
    Pause { name: String },
    /// Go on from a pause (the hold starts again).
    Resume { name: String },
    /// Canary to 100 now.
    Promote { name: String },
    /// Canary to 0 now.
    Abort { name: String },
    /// Remove a rollout from the config (its weights stay where they are).
    Delete { name: String },
}

/// The request a rollout command makes (`watch` makes its own, repeated).
pub(super) fn request(command: &RolloutCommand) -> anyhow::Result<Call> {
    let operator = |name: &str, command: Command| {
        call_to(ApiEndpoint::RolloutCommand, &[name, command.as_str()], None)
    };
    Ok(match command {
        RolloutCommand::List => call_to(ApiEndpoint::ListRollouts, &[], None),
        RolloutCommand::Show { name } => call_to(ApiEndpoint::ShowRollout, &[name], None),
        RolloutCommand::Watch(args) => call_to(ApiEndpoint::ShowRollout, &[&args.name], None),
        RolloutCommand::Start { file } => {
            call_to(ApiEndpoint::AddRollout, &[], Some(read_file(file)?))
        }
        RolloutCommand::Pause { name } => operator(name, Command::Pause),
        RolloutCommand::Resume { name } => operator(name, Command::Resume),
        RolloutCommand::Promote { name } => operator(name, Command::Promote),
        RolloutCommand::Abort { name } => operator(name, Command::Abort),
        RolloutCommand::Delete { name } => call_to(ApiEndpoint::RemoveRollout, &[name], None),
    })
}

/// `2/5`: the 1-based step of all steps (`0/5` before the first).
pub(super) fn step(status: &Value) -> String {
    let steps = status["steps"].as_array().map_or(0, Vec::len);
    format!("{}/{steps}", text(&status["step"]))
}

/// `50%`: the canary's weight.
pub(super) fn weight(status: &Value) -> String {
    format!("{}%", text(&status["weight"]))
}

/// A gate's value or bound in its unit: `120ms`, `1.5%`, `$0.012`, `1.2`.
fn in_unit(value: &Value, unit: &Value) -> String {
    let Some(v) = value.as_f64() else {
        return "n/a".to_string();
    };
    match unit.as_str() {
        Some("ms") => format!("{}ms", decimals(v)),
        Some("%") => format!("{}%", decimals(v)),
        Some("usd") => format!("${}", decimals_usd(v)),
        _ => decimals(v),
    }
}

/// Prices per 1k tokens are fractions of a cent: six decimals.
fn decimals_usd(v: f64) -> String {
    let fixed = format!("{v:.6}");
    fixed
        .trim_end_matches('0')
        .trim_end_matches('.')
        .to_string()
}

/// `ok`, `breached`, or `not judged` (too few samples, or no reading).
pub(super) fn verdict(reading: &Value) -> &'static str {
    match reading["ok"].as_bool() {
        Some(true) => "ok",
        Some(false) => "breached",
        None => "not judged",
    }
}

/// `ttft_p95 120ms<=150ms` (`>` when breached, `vs` when not judged; the
/// other way round for a lower bound such as `grpc_success_rate_min`).
pub(super) fn gate_summary(name: &str, reading: &Value) -> String {
    let lower = Gate::parse(name).is_ok_and(Gate::is_lower_bound);
    let cmp = match (reading["ok"].as_bool(), lower) {
        (Some(true), false) => "<=",
        (Some(false), false) => ">",
        (Some(true), true) => ">=",
        (Some(false), true) => "<",
        (None, _) => " vs ",
    };
    let unit = &reading["unit"];
    format!(
        "{name} {}{cmp}{}",
        in_unit(&reading["value"], unit),
        in_unit(&reading["bound"], unit)
    )
}

fn gates(status: &Value) -> Vec<(&String, &Value)> {
    status["gates"]
        .as_object()
        .map(|g| g.iter().collect())
        .unwrap_or_default()
}

/// The gate readings of the last evaluation, a row each.
pub(super) fn gates_table(status: &Value, colour: bool) -> String {
    let mut table = Table::new(&["GATE", "VALUE", "BOUND", "SAMPLES", "VERDICT"]);
    for (name, reading) in gates(status) {
        let unit = &reading["unit"];
        table.row(vec![
            name.as_str().into(),
            in_unit(&reading["value"], unit).into(),
            in_unit(&reading["bound"], unit).into(),
            text(&reading["samples"]).into(),
            Cell::state(verdict(reading)),
        ]);
    }
    table.render(colour)
}

/// `pending -> progressing (step 1, weight 50): started`: one transition.
pub(super) fn event_line(event: &Value) -> String {
    format!(
        "{} -> {} (step {}, weight {}): {}",
        text(&event["from"]),
        text(&event["to"]),
        text(&event["step"]),
        text(&event["weight"]),
        text(&event["reason"])
    )
}

/// `GET /v1/rollouts`: a row per rollout.
pub(super) fn list(answer: &Value, colour: bool) -> String {
    let mut table = Table::new(&[
        "NAME", "ROUTE", "STABLE", "CANARY", "STATE", "STEP", "WEIGHT", "BREACHES", "GATES",
    ]);
    for status in answer.as_array().map_or(&[][..], Vec::as_slice) {
        let summaries: Vec<String> = gates(status)
            .into_iter()
            .map(|(name, reading)| gate_summary(name, reading))
            .collect();
        table.row(vec![
            text(&status["name"]).into(),
            text(&status["route"]).into(),
            text(&status["stable"]).into(),
            text(&status["canary"]).into(),
            Cell::state(text(&status["state"])),
            step(status).into(),
            weight(status).into(),
            text(&status["breaches"]).into(),
            summaries.join(", ").into(),
        ]);
    }
    table.render(colour)
}

/// `GET /v1/rollouts/{name}` (and the answer to start, pause, ...): the
/// rollout, its gates, and its history when the answer has one.
pub(super) fn show(status: &Value, colour: bool) -> String {
    let steps: Vec<String> = status["steps"]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(text)
        .collect();
    let mut head = Table::new(&[]);
    head.row(vec!["name".into(), text(&status["name"]).into()]);
    head.row(vec![
        "route".into(),
        format!(
            "{} (stable {}, canary {})",
            text(&status["route"]),
            text(&status["stable"]),
            text(&status["canary"])
        )
        .into(),
    ]);
    head.row(vec!["state".into(), Cell::state(text(&status["state"]))]);
    head.row(vec![
        "step".into(),
        format!("{} (steps {})", step(status), steps.join(", ")).into(),
    ]);
    head.row(vec!["weight".into(), weight(status).into()]);
    head.row(vec!["breaches".into(), text(&status["breaches"]).into()]);
    if let Some(prometheus) = status["source"]["prometheus"].as_str() {
        head.row(vec!["source".into(), prometheus.into()]);
    }
    let mut page = vec![
        head.render(colour),
        String::new(),
        gates_table(status, colour),
    ];
    if let Some(steps) = status["step_history"].as_array() {
        page.extend([String::new(), step_table(steps, colour)]);
    }
    if let Some(events) = status["events"].as_array() {
        let mut table = Table::new(&["TIME", "FROM", "TO", "STEP", "WEIGHT", "REASON"]);
        for event in events {
            table.row(vec![
                time(&event["time_ms"]).into(),
                Cell::state(text(&event["from"])),
                Cell::state(text(&event["to"])),
                text(&event["step"]).into(),
                text(&event["weight"]).into(),
                text(&event["reason"]).into(),
            ]);
        }
        page.extend([String::new(), table.render(colour)]);
    }
    page.join("\n")
}

/// Each step reached: the canary's error rate and p99 beside its prompt
/// coverage (`-` where the route does not measure coverage).
fn step_table(steps: &[Value], colour: bool) -> String {
    let mut table = Table::new(&[
        "STEP", "WEIGHT", "REQUESTS", "ERRORS", "P99", "COVERAGE", "CLUSTERS",
    ]);
    let unit = |v: &Value, unit: &str| {
        v.as_f64()
            .map_or("-".to_string(), |v| format!("{}{unit}", decimals(v)))
    };
    for s in steps {
        let coverage = &s["coverage"];
        let clusters = if coverage.is_object() {
            format!(
                "{}/{}",
                text(&coverage["canary_clusters"]),
                text(&coverage["clusters_seen"])
            )
        } else {
            "-".to_string()
        };
        table.row(vec![
            text(&s["step"]).into(),
            format!("{}%", text(&s["weight"])).into(),
            text(&s["requests"]).into(),
            unit(&s["error_rate"], "%").into(),
            unit(&s["latency_p99_ms"], "ms").into(),
            unit(&coverage["percent"], "%").into(),
            clusters.into(),
        ]);
    }
    table.render(colour)
}

#[cfg(test)]
pub(super) mod tests;
