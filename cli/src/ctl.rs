//! `sluice ctl`: a small client for the control API.

mod fault;

use std::process::ExitCode;

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use clap::{Args, Subcommand};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sluice_control::{ApiEndpoint, Command};

mod mirror;
use mirror::MirrorCommand;

#[derive(Args)]
pub struct CtlArgs {
    /// Control API base URL.
    #[arg(
        long,
        env = "SLUICE_ADMIN_URL",
        default_value = "http://127.0.0.1:9901"
    )]
    url: String,
    #[command(flatten)]
    token: AdminToken,
    #[command(subcommand)]
    command: CtlCommand,
}

/// The control API's bearer token, read the same way by every verb that
/// calls the API (`ctl`, `load --report-to`).
#[derive(Args, Clone, Debug, Default)]
pub struct AdminToken {
    /// Bearer token of the control API.
    #[arg(
        long = "token",
        env = "SLUICE_ADMIN_TOKEN",
        hide_env_values = true,
        default_value = ""
    )]
    pub token: String,
}

#[derive(Subcommand)]
enum CtlCommand {
    /// List routes and their splits.
    Routes,
    /// Set a route's split: `sluice ctl split chat llm-stable=80 llm-canary=20`.
    Split { route: String, weights: Vec<String> },
    /// Live stats per route and cluster.
    Stats,
    /// The audit log.
    Events,
    /// The live config.
    Config,
    /// Replace the config with a YAML or JSON file.
    Apply { file: std::path::PathBuf },
    /// Progressive rollouts: list, show, start, pause, resume, promote, abort.
    Rollout {
        #[command(subcommand)]
        command: RolloutCommand,
    },
    /// Fault experiments: list, show, add, rm.
    Fault {
        #[command(subcommand)]
        command: fault::FaultCommand,
    },
    /// Shadow traffic: set or stop a route's mirror, show recent diffs.
    Mirror {
        #[command(subcommand)]
        command: MirrorCommand,
    },
}

#[derive(Subcommand)]
enum RolloutCommand {
    /// Every rollout: state, step, weight, last gate readings.
    List,
    /// One rollout with its gates and the history of its transitions.
    Show { name: String },
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

/// One call of the control API: method, path, body.
pub(crate) type Call = (&'static str, String, Option<String>);

/// `endpoint` with `args` in its path's placeholders, and `body`.
pub(crate) fn call_to(endpoint: ApiEndpoint, args: &[&str], body: Option<String>) -> Call {
    (endpoint.method(), endpoint.path(args), body)
}

/// A file's text, for a body; the error names the file.
pub(crate) fn read_file(file: &std::path::Path) -> anyhow::Result<String> {
    std::fs::read_to_string(file).with_context(|| file.display().to_string())
}

/// A JSON object of the flags that were given; those not given are left out.
pub(crate) fn given<'a>(
    flags: impl IntoIterator<Item = (&'a str, Option<serde_json::Value>)>,
) -> serde_json::Map<String, serde_json::Value> {
    flags
        .into_iter()
        .filter_map(|(key, value)| Some((key.to_string(), value?)))
        .collect()
}

/// The request a rollout command makes.
fn rollout_request(command: &RolloutCommand) -> anyhow::Result<Call> {
    let operator = |name: &str, command: Command| {
        call_to(ApiEndpoint::RolloutCommand, &[name, command.as_str()], None)
    };
    Ok(match command {
        RolloutCommand::List => call_to(ApiEndpoint::ListRollouts, &[], None),
        RolloutCommand::Show { name } => call_to(ApiEndpoint::ShowRollout, &[name], None),
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

pub fn run(args: CtlArgs) -> anyhow::Result<ExitCode> {
    let (method, path, body) = match &args.command {
        CtlCommand::Routes => call_to(ApiEndpoint::ListRoutes, &[], None),
        CtlCommand::Split { route, weights } => {
            call_to(ApiEndpoint::PutSplit, &[route], Some(split_body(weights)?))
        }
        CtlCommand::Stats => call_to(ApiEndpoint::Stats, &[], None),
        CtlCommand::Events => call_to(ApiEndpoint::Events, &[], None),
        CtlCommand::Config => call_to(ApiEndpoint::GetConfig, &[], None),
        CtlCommand::Apply { file } => call_to(ApiEndpoint::PutConfig, &[], Some(read_file(file)?)),
        CtlCommand::Rollout { command } => rollout_request(command)?,
        CtlCommand::Fault { command } => fault::request(command)?,
        CtlCommand::Mirror { command } => mirror::request(command)?,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (status, text) = runtime.block_on(call(&args.url, &args.token, method, &path, body))?;
    let pretty = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or(text);
    if status.is_success() {
        #[allow(clippy::print_stdout)]
        {
            println!("{pretty}");
        }
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("{status}\n{pretty}");
        Ok(ExitCode::from(if status.is_client_error() { 2 } else { 1 }))
    }
}

/// `a=80 b=20` → `{"a":80,"b":20}`.
fn split_body(weights: &[String]) -> anyhow::Result<String> {
    if weights.is_empty() {
        bail!("give weights as cluster=weight");
    }
    let mut map = serde_json::Map::new();
    for w in weights {
        let (name, value) = w
            .split_once('=')
            .ok_or_else(|| anyhow!("`{w}` is not cluster=weight"))?;
        let value: u32 = value
            .parse()
            .map_err(|_| anyhow!("`{w}`: weight must be a whole number"))?;
        map.insert(name.to_string(), value.into());
    }
    Ok(serde_json::Value::Object(map).to_string())
}

/// One call of the control API at `base`: the status and the answer's text.
pub async fn call(
    base: &str,
    token: &AdminToken,
    method: &str,
    path: &str,
    body: Option<String>,
) -> anyhow::Result<(http::StatusCode, String)> {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let url = format!("{}{}", base.trim_end_matches('/'), path);
    let request = http::Request::builder()
        .method(method)
        .uri(&url)
        .header("authorization", format!("Bearer {}", token.token))
        .body(Full::new(Bytes::from(body.unwrap_or_default())))?;
    let response = client.request(request).await.with_context(|| url.clone())?;
    let status = response.status();
    let bytes = response.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn rollout_commands_call_the_endpoints_of_the_table() {
        let call = |command| rollout_request(&command).unwrap();
        let name = || "chat-v2".to_string();
        for &c in Command::ALL {
            let command = match c {
                Command::Pause => RolloutCommand::Pause { name: name() },
                Command::Resume => RolloutCommand::Resume { name: name() },
                Command::Promote => RolloutCommand::Promote { name: name() },
                Command::Abort => RolloutCommand::Abort { name: name() },
            };
            let path = format!("/v1/rollouts/chat-v2/{c}");
            assert_eq!(call(command), ("POST", path, None));
        }
        let get = ("GET", "/v1/rollouts".to_string(), None);
        assert_eq!(call(RolloutCommand::List), get);
        let delete = ("DELETE", "/v1/rollouts/chat-v2".to_string(), None);
        assert_eq!(call(RolloutCommand::Delete { name: name() }), delete);
    }
}
