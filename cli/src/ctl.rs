//! `sluice ctl`: a small client for the control API. Without `--json` an
//! answer is shown as an aligned table (or YAML, or `key  value` lines), and
//! an error answer as `path: message` lines on stderr.

mod errors;
mod fault;
mod mirror;
mod rollout;
mod table;
mod view;
mod watch;

use std::io::IsTerminal as _;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use clap::{Args, Subcommand};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use sluice_control::ApiEndpoint;

use fault::FaultCommand;
use mirror::MirrorCommand;
use rollout::RolloutCommand;
use view::View;
use watch::Display;

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
    /// Print the API's JSON answer instead of a table (every verb, those
    /// that change things too).
    #[arg(long, global = true)]
    json: bool,
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
    /// Progressive rollouts: list, show, watch, start, pause, resume, promote, abort, delete.
    Rollout {
        #[command(subcommand)]
        command: RolloutCommand,
    },
    /// Fault experiments: list, show, add, rm.
    Fault {
        #[command(subcommand)]
        command: FaultCommand,
    },
    /// Shadow traffic: set or stop a route's mirror, show recent diffs.
    Mirror {
        #[command(subcommand)]
        command: MirrorCommand,
    },
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

/// The request a verb makes, and how its answer is shown.
fn request(command: &CtlCommand) -> anyhow::Result<(Call, View)> {
    Ok(match command {
        CtlCommand::Routes => (call_to(ApiEndpoint::ListRoutes, &[], None), View::Routes),
        CtlCommand::Split { route, weights } => (
            call_to(ApiEndpoint::PutSplit, &[route], Some(split_body(weights)?)),
            View::Fields,
        ),
        CtlCommand::Stats => (call_to(ApiEndpoint::Stats, &[], None), View::Stats),
        CtlCommand::Events => (call_to(ApiEndpoint::Events, &[], None), View::Events),
        CtlCommand::Config => (call_to(ApiEndpoint::GetConfig, &[], None), View::Config),
        CtlCommand::Apply { file } => (
            call_to(ApiEndpoint::PutConfig, &[], Some(read_file(file)?)),
            View::Fields,
        ),
        CtlCommand::Rollout { command } => {
            let view = match command {
                RolloutCommand::List => View::Rollouts,
                RolloutCommand::Delete { .. } => View::Fields,
                _ => View::Rollout,
            };
            (rollout::request(command)?, view)
        }
        CtlCommand::Fault { command } => {
            let view = match command {
                FaultCommand::List => View::Faults,
                _ => View::Fields,
            };
            (fault::request(command)?, view)
        }
        CtlCommand::Mirror { command } => {
            let view = match command {
                MirrorCommand::Diffs => View::Diffs,
                _ => View::Fields,
            };
            (mirror::request(command)?, view)
        }
    })
}

/// Exit 0 with the answer on stdout; an error answer on stderr as
/// `path: message` lines, exit 2 when refused (4xx) and 1 when the server
/// failed (5xx). `rollout watch` has its own codes (see `watch`).
pub fn run(args: CtlArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    if let CtlCommand::Rollout {
        command: RolloutCommand::Watch(watch),
    } = &args.command
    {
        let stdout = std::io::stdout();
        let display = match (args.json, stdout.is_terminal()) {
            (true, _) => Display::Json,
            (false, true) => Display::Redraw {
                colour: table::colour_stdout(),
                width: rustix::termios::tcgetwinsize(&stdout)
                    .ok()
                    .map(|size| usize::from(size.ws_col)),
            },
            (false, false) => Display::Lines,
        };
        let watching = watch::watch(&args.url, &args.token, watch, stdout.lock(), display);
        return Ok(runtime.block_on(watching));
    }
    let ((method, path, body), view) = request(&args.command)?;
    let (status, text) = runtime.block_on(call(&args.url, &args.token, method, &path, body))?;
    if !status.is_success() {
        return Ok(errors::report(status, &text));
    }
    if let CtlCommand::Mirror {
        command: MirrorCommand::Baseline {
            out: Some(file), ..
        },
    } = &args.command
    {
        print(&mirror::save_baseline(file, &text)?);
        return Ok(ExitCode::SUCCESS);
    }
    let shown = match serde_json::from_str::<Value>(&text) {
        Ok(answer) if args.json => serde_json::to_string_pretty(&answer).unwrap_or(text),
        Ok(answer) => view::render(view, &answer, table::colour_stdout()),
        Err(_) => text,
    };
    print(&shown);
    Ok(ExitCode::SUCCESS)
}

/// `text` and a newline on stdout; a reader that went away (`| head`) is
/// not an error.
fn print(text: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stdout().lock(), "{}", text.trim_end_matches('\n'));
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
