//! `sluice ctl fault add|list|show|rm`: flags that mirror the JSON of one
//! `faults:` item, turned into the body of `POST /v1/faults`.

use anyhow::{anyhow, bail};
use clap::{Args, Subcommand};
use serde_json::{json, Map, Value};
use sluice_control::ApiEndpoint;
use sluice_filters::ActionName;

use super::{call_to, given, read_file, Call};

#[derive(Subcommand)]
pub(super) enum FaultCommand {
    /// Every experiment: state, injected count, time left.
    List,
    /// One experiment.
    Show { id: String },
    /// Add an experiment from flags, or from a YAML/JSON file with `--file`.
    Add(Box<AddArgs>),
    /// Remove an experiment; it stops at once.
    Rm { id: String },
}

#[derive(Args, Default)]
pub(super) struct AddArgs {
    /// One `faults:` item as YAML or JSON; the other flags are then not allowed.
    #[arg(long, conflicts_with_all = ["id", "ttl", "action"])]
    file: Option<std::path::PathBuf>,
    #[arg(long)]
    id: Option<String>,
    /// How long it may fire, e.g. `5m` (required).
    #[arg(long)]
    ttl: Option<String>,
    /// Share of matching requests (or TCP connections), 0..=100.
    #[arg(long)]
    percent: Option<f64>,
    #[arg(long)]
    max_active: Option<u32>,
    /// match.route
    #[arg(long)]
    route: Option<String>,
    /// match.cluster
    #[arg(long)]
    cluster: Option<String>,
    /// match.listener
    #[arg(long)]
    listener: Option<String>,
    /// match.model
    #[arg(long)]
    model: Option<String>,
    /// match.headers, as name=value (repeatable).
    #[arg(long = "header")]
    headers: Vec<String>,
    /// halt_if.error_rate, e.g. `5%`.
    #[arg(long)]
    halt_error_rate: Option<String>,
    /// halt_if.window, e.g. `10s`.
    #[arg(long, requires = "halt_error_rate")]
    halt_window: Option<String>,
    #[arg(long, value_parser = ActionName::parse, help = action_help())]
    action: Option<ActionName>,
    /// The action's fields as key=value (repeatable): `--param delay=50ms`.
    /// Whole numbers are sent as numbers.
    #[arg(long = "param")]
    params: Vec<String>,
}

/// `--action`'s help, with the names from the table.
fn action_help() -> String {
    format!("The action's name: {}.", ActionName::names())
}

/// The request a fault command makes.
pub(super) fn request(command: &FaultCommand) -> anyhow::Result<Call> {
    Ok(match command {
        FaultCommand::List => call_to(ApiEndpoint::ListFaults, &[], None),
        FaultCommand::Show { id } => call_to(ApiEndpoint::ShowFault, &[id], None),
        FaultCommand::Rm { id } => call_to(ApiEndpoint::RemoveFault, &[id], None),
        FaultCommand::Add(args) => call_to(ApiEndpoint::AddFault, &[], Some(add_body(args)?)),
    })
}

fn add_body(a: &AddArgs) -> anyhow::Result<String> {
    if let Some(file) = &a.file {
        return read_file(file);
    }
    let Some(action) = &a.action else {
        bail!("--action is required (or --file)");
    };
    let mut body = given([
        ("id", a.id.clone().map(Value::from)),
        ("ttl", a.ttl.clone().map(Value::from)),
        ("percent", a.percent.map(Value::from)),
        ("max_active", a.max_active.map(Value::from)),
    ]);
    let mut matcher = given([
        ("route", a.route.clone().map(Value::from)),
        ("cluster", a.cluster.clone().map(Value::from)),
        ("listener", a.listener.clone().map(Value::from)),
        ("model", a.model.clone().map(Value::from)),
    ]);
    if !a.headers.is_empty() {
        matcher.insert("headers".into(), Value::Object(pairs(&a.headers, false)?));
    }
    if !matcher.is_empty() {
        body.insert("match".into(), Value::Object(matcher));
    }
    if let Some(rate) = &a.halt_error_rate {
        let mut halt = json!({ "error_rate": rate });
        if let Some(w) = &a.halt_window {
            halt["window"] = w.clone().into();
        }
        body.insert("halt_if".into(), halt);
    }
    let params = Value::Object(pairs(&a.params, true)?);
    body.insert("action".into(), json!({ action.as_str(): params }));
    Ok(Value::Object(body).to_string())
}

/// `k=v` flags as a JSON object; with `numbers`, whole numbers stay numbers.
fn pairs(items: &[String], numbers: bool) -> anyhow::Result<Map<String, Value>> {
    let mut map = Map::new();
    for item in items {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| anyhow!("`{item}` is not key=value"))?;
        let value = match v.parse::<u64>() {
            Ok(n) if numbers => Value::from(n),
            _ => Value::from(v),
        };
        map.insert(k.to_string(), value);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        add: AddArgs,
    }

    #[test]
    fn the_flags_given_become_the_body_and_the_others_are_left_out() {
        use clap::Parser;
        let flags = Flags::try_parse_from([
            "add",
            "--action",
            "abort",
            "--id",
            "x",
            "--route",
            "chat",
            "--param",
            "status=503",
        ])
        .unwrap();
        let body: Value = serde_json::from_str(&add_body(&flags.add).unwrap()).unwrap();
        assert_eq!(
            body,
            json!({"id": "x", "match": {"route": "chat"}, "action": {"abort": {"status": 503}}})
        );
    }

    #[test]
    fn the_action_flag_takes_the_names_of_the_table() {
        use clap::Parser;
        let flags = Flags::try_parse_from(["add", "--action", "slow_close"]).unwrap();
        assert_eq!(flags.add.action, Some(ActionName::SlowClose));
        let e = Flags::try_parse_from(["add", "--action", "explode"])
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains(
                "unknown action `explode` (expected one of delay, abort, reset, close, \
                 first_token_delay, token_delay, stall, truncate, drop_usage, drop_done, \
                 corrupt, bandwidth, latency, slicer, slow_close, timeout, reset_peer, \
                 limit_data)"
            ),
            "{e}"
        );
    }

    #[test]
    fn flags_become_the_json_of_one_experiment() {
        let args = AddArgs {
            id: Some("slow".into()),
            ttl: Some("5m".into()),
            percent: Some(50.0),
            route: Some("chat".into()),
            headers: vec!["x-tenant=a".into()],
            halt_error_rate: Some("5%".into()),
            halt_window: Some("10s".into()),
            action: Some(ActionName::TokenDelay),
            params: vec!["delay=50ms".into()],
            ..AddArgs::default()
        };
        let body: Value = serde_json::from_str(&add_body(&args).unwrap()).unwrap();
        assert_eq!(
            body,
            json!({
                "id": "slow", "ttl": "5m", "percent": 50.0,
                "match": {"route": "chat", "headers": {"x-tenant": "a"}},
                "halt_if": {"error_rate": "5%", "window": "10s"},
                "action": {"token_delay": {"delay": "50ms"}},
            })
        );
        let args = AddArgs {
            ttl: Some("1m".into()),
            action: Some(ActionName::Abort),
            params: vec!["status=503".into()],
            ..AddArgs::default()
        };
        let body: Value = serde_json::from_str(&add_body(&args).unwrap()).unwrap();
        assert_eq!(body["action"], json!({"abort": {"status": 503}}));
        let none = AddArgs::default();
        assert_eq!(
            add_body(&none).unwrap_err().to_string(),
            "--action is required (or --file)"
        );
        let bad = AddArgs {
            action: Some(ActionName::Reset),
            params: vec!["oops".into()],
            ..AddArgs::default()
        };
        assert_eq!(
            add_body(&bad).unwrap_err().to_string(),
            "`oops` is not key=value"
        );
    }
}
