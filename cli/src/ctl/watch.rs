//! `sluice ctl rollout watch NAME`: polls the rollout until it ends and
//! exits by how it ended, for scripts (0 promoted, 1 rolled back or
//! aborted, 2 not there or the API out of reach).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde_json::Value;
use sluice_control::{ApiEndpoint, State};

use super::rollout::{event_line, gate_summary, gates_table, step, weight};
use super::table::state_colour;
use super::view::text;
use super::{call, errors, AdminToken};

#[derive(Args)]
pub(super) struct WatchArgs {
    pub(super) name: String,
    /// Time between two polls, e.g. `1s`, `250ms`.
    #[arg(long, default_value = "1s", value_parser = interval)]
    interval: Duration,
}

fn interval(text: &str) -> Result<Duration, String> {
    let every = sluice_control::parse_duration(text)?;
    match every.is_zero() {
        true => Err("must be more than 0".to_string()),
        false => Ok(every),
    }
}

/// The exit code once the rollout is in `state`; `None` while it can still
/// move (a paused rollout can be resumed, so the watch goes on).
pub(super) fn exit_code(state: State) -> Option<u8> {
    match state {
        State::Promoted => Some(0),
        State::RolledBack | State::Aborted => Some(1),
        State::Pending | State::Progressing | State::Paused => None,
    }
}

/// How each poll is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Display {
    /// On a terminal `width` columns wide (when known): the page redrawn
    /// in place (cursor up over the rows it took, clear).
    Redraw { colour: bool, width: Option<usize> },
    /// Piped: one line each time the rollout changes.
    Lines,
    /// `--json`: the API's answer, compact, one a line, each time it changes.
    Json,
}

/// Exit code 2: the rollout is not there or could not be read.
const UNWATCHABLE: u8 = 2;

/// Polls until the rollout ends (see [`exit_code`]), showing it on `out`.
pub(super) async fn watch(
    url: &str,
    token: &AdminToken,
    args: &WatchArgs,
    out: impl Write,
    display: Display,
) -> ExitCode {
    let path = ApiEndpoint::ShowRollout.path(&[&args.name]);
    let mut screen = Screen::new(out, display);
    loop {
        let (status, body) = match call(url, token, "GET", &path, None).await {
            Ok(answer) => answer,
            Err(e) => {
                eprintln!("error: {e:#}");
                return ExitCode::from(UNWATCHABLE);
            }
        };
        if !status.is_success() {
            errors::report(status, &body);
            return ExitCode::from(UNWATCHABLE);
        }
        let state = match parse(&body) {
            Ok((rollout, state)) => {
                screen.show(&rollout, &body);
                state
            }
            Err(e) => {
                eprintln!("{path}: {e}");
                return ExitCode::from(UNWATCHABLE);
            }
        };
        if let Some(code) = exit_code(state) {
            return ExitCode::from(code);
        }
        tokio::time::sleep(args.interval).await;
    }
}

fn parse(body: &str) -> Result<(Value, State), String> {
    let rollout: Value =
        serde_json::from_str(body).map_err(|e| format!("the answer is not JSON: {e}"))?;
    let state = serde_json::from_value::<State>(rollout["state"].clone())
        .map_err(|e| format!("state: {e}"))?;
    Ok((rollout, state))
}

/// What was shown last, so that a redraw covers it and a line is written
/// only for a change.
pub(super) struct Screen<W> {
    out: W,
    display: Display,
    /// Lines of the last page drawn (redraw).
    drawn: usize,
    /// What the last line was written for (lines, JSON).
    last: Option<String>,
}

impl<W: Write> Screen<W> {
    pub(super) fn new(out: W, display: Display) -> Self {
        Screen {
            out,
            display,
            drawn: 0,
            last: None,
        }
    }

    /// Shows one poll's answer; a reader gone away (`| head`) is ignored.
    pub(super) fn show(&mut self, rollout: &Value, body: &str) {
        let text = match self.display {
            Display::Redraw { colour, width } => {
                // Up over the last page, back to column 1, clear to the end.
                let up = match self.drawn {
                    0 => String::new(),
                    n => format!("\x1b[{n}A\r\x1b[J"),
                };
                self.drawn = rows(&page(rollout, false), width);
                Some(format!("{up}{}\n", page(rollout, colour)))
            }
            Display::Lines | Display::Json => {
                let key = change(rollout);
                let changed = self.last.as_ref() != Some(&key);
                self.last = Some(key);
                changed.then(|| match self.display {
                    Display::Json => format!("{}\n", body.trim()),
                    _ => format!("{}\n", line(rollout)),
                })
            }
        };
        if let Some(text) = text {
            let _ = self.out.write_all(text.as_bytes());
            let _ = self.out.flush();
        }
    }
}

/// The terminal rows `text` takes: a line longer than the terminal wraps
/// onto more than one, and the next redraw must go up over all of them.
fn rows(text: &str, width: Option<usize>) -> usize {
    text.lines()
        .map(|line| match width {
            Some(w) if w > 0 => line.chars().count().div_ceil(w).max(1),
            _ => 1,
        })
        .sum()
}

/// What counts as a change for a line: state, step, weight, breaches and
/// the length of the history (gate values move at every evaluation).
fn change(rollout: &Value) -> String {
    let events = rollout["events"].as_array().map_or(0, Vec::len);
    format!(
        "{} {} {} {} {events}",
        text(&rollout["state"]),
        text(&rollout["step"]),
        text(&rollout["weight"]),
        text(&rollout["breaches"])
    )
}

fn last_event(rollout: &Value) -> Option<&Value> {
    rollout["events"].as_array().and_then(|e| e.last())
}

/// One line for a log: `chat-v2 progressing step 1/2 weight 50% breaches 0
/// | ttft_p95 120ms<=150ms | last: pending -> progressing (...): started`.
pub(super) fn line(rollout: &Value) -> String {
    let mut parts = vec![format!(
        "{} {} step {} weight {} breaches {}",
        text(&rollout["name"]),
        text(&rollout["state"]),
        step(rollout),
        weight(rollout),
        text(&rollout["breaches"])
    )];
    let gates: Vec<String> = rollout["gates"]
        .as_object()
        .map(|g| g.iter().map(|(n, r)| gate_summary(n, r)).collect())
        .unwrap_or_default();
    if !gates.is_empty() {
        parts.push(gates.join(", "));
    }
    if let Some(event) = last_event(rollout) {
        parts.push(format!("last: {}", event_line(event)));
    }
    parts.join(" | ")
}

/// The page a terminal shows: the rollout, its gates, its last transition.
pub(super) fn page(rollout: &Value, colour: bool) -> String {
    let state = text(&rollout["state"]);
    let shown = match state_colour(&state) {
        Some(c) => c.paint(&state, colour),
        None => state,
    };
    let mut page = vec![
        format!(
            "{}  {shown}  step {}  weight {}  breaches {}",
            text(&rollout["name"]),
            step(rollout),
            weight(rollout),
            text(&rollout["breaches"])
        ),
        gates_table(rollout, colour),
    ];
    if let Some(event) = last_event(rollout) {
        page.push(format!("last: {}", event_line(event)));
    }
    page.join("\n")
}

#[cfg(test)]
mod tests;
