//! What `sluice ctl` prints of an answer without `--json`: a table for
//! what lists things, the config as YAML, and `key  value` lines (nested
//! keys joined with dots) for the rest, such as the answer to a change.

use serde_json::Value;

use super::rollout;
use super::table::{Cell, Table};

/// How one verb's answer is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum View {
    Routes,
    Stats,
    Events,
    Config,
    Rollouts,
    Rollout,
    Faults,
    Diffs,
    /// `key  value` lines: one experiment, and the answers to changes.
    Fields,
}

/// The text for `answer`; `colour` only on a terminal.
pub(crate) fn render(view: View, answer: &Value, colour: bool) -> String {
    match view {
        View::Routes => routes(answer, colour),
        View::Stats => stats(answer, colour),
        View::Events => events(answer, colour),
        View::Config => config(answer),
        View::Rollouts => rollout::list(answer, colour),
        View::Rollout => rollout::show(answer, colour),
        View::Faults => faults(answer, colour),
        View::Diffs => diffs(answer, colour),
        View::Fields => fields(answer, colour),
    }
}

/// A JSON value as one cell: `-` for null, numbers with at most three
/// decimals, lists joined with commas.
pub(crate) fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => u.to_string(),
            (_, Some(i), _) => i.to_string(),
            (_, _, Some(f)) => decimals(f),
            _ => n.to_string(),
        },
        Value::Bool(b) => b.to_string(),
        Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(","),
        Value::Object(_) => value.to_string(),
    }
}

/// `f` with at most three decimals and no trailing zeros: `12.5`, `0.013`, `3`.
pub(crate) fn decimals(f: f64) -> String {
    let fixed = format!("{f:.3}");
    let trimmed = fixed.trim_end_matches('0').trim_end_matches('.');
    match trimmed {
        "-0" => "0".to_string(),
        t => t.to_string(),
    }
}

/// Milliseconds since the Unix epoch as `2026-05-01 12:00:00` (UTC).
pub(crate) fn time(ms: &Value) -> String {
    let Some(ms) = ms.as_u64().and_then(|ms| i64::try_from(ms).ok()) else {
        return "-".to_string();
    };
    let stamp = sluice_filters::format_rfc3339(ms.saturating_mul(1000));
    stamp.get(..19).unwrap_or(&stamp).replace('T', " ")
}

fn items<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// `{"a": 80, "b": 20}` as `a=80 b=20`.
fn pairs(value: &Value) -> String {
    match value.as_object() {
        Some(map) => map
            .iter()
            .map(|(k, v)| format!("{k}={}", text(v)))
            .collect::<Vec<_>>()
            .join(" "),
        None => text(value),
    }
}

fn routes(answer: &Value, colour: bool) -> String {
    let mut table = Table::new(&["ROUTE", "LISTENER", "SPLIT", "STICKY"]);
    for route in answer.as_array().map_or(&[][..], Vec::as_slice) {
        table.row(vec![
            text(&route["name"]).into(),
            text(&route["listener"]).into(),
            pairs(&route["split"]).into(),
            text(&route["sticky"]["header"]).into(),
        ]);
    }
    table.render(colour)
}

fn stats(answer: &Value, colour: bool) -> String {
    let mut table = Table::new(&[
        "ROUTE",
        "CLUSTER",
        "VERSION",
        "REQUESTS",
        "RPS",
        "ERRORS",
        "ERROR_RATE",
        "P50_MS",
        "P95_MS",
        "P99_MS",
        "TTFT_P95_MS",
        "TOKENS/S",
    ]);
    for row in items(answer, "stats") {
        let percent = row["error_rate"]
            .as_f64()
            .map_or_else(|| "-".to_string(), |r| format!("{}%", decimals(r * 100.0)));
        table.row(vec![
            text(&row["route"]).into(),
            text(&row["cluster"]).into(),
            text(&row["version"]).into(),
            text(&row["requests"]).into(),
            text(&row["rps"]).into(),
            text(&row["errors"]).into(),
            percent.into(),
            text(&row["latency_ms"]["p50"]).into(),
            text(&row["latency_ms"]["p95"]).into(),
            text(&row["latency_ms"]["p99"]).into(),
            text(&row["ttft_ms"]["p95"]).into(),
            text(&row["output_tokens_per_second"]).into(),
        ]);
    }
    format!(
        "{}\n(over the last {} s; {} samples dropped)",
        table.render(colour),
        text(&answer["window_seconds"]),
        text(&answer["dropped_samples"])
    )
}

fn events(answer: &Value, colour: bool) -> String {
    let mut table = Table::new(&[
        "SEQ", "TIME", "SOURCE", "TOKEN", "ACTION", "RESULT", "VERSION", "ERRORS",
    ]);
    for event in items(answer, "events") {
        let errors: Vec<String> = items(event, "errors").iter().map(text).collect();
        table.row(vec![
            text(&event["seq"]).into(),
            time(&event["time_ms"]).into(),
            text(&event["source"]).into(),
            text(&event["token"]).into(),
            text(&event["action"]).into(),
            Cell::state(text(&event["result"])),
            text(&event["version"]).into(),
            errors.join("; ").into(),
        ]);
    }
    table.render(colour)
}

/// The live config as YAML, in the order of the config's keys where the
/// answer reads as this build's config, under a comment with its version.
fn config(answer: &Value) -> String {
    let config = &answer["config"];
    let yaml = match serde_json::from_value::<sluice_control::RawConfig>(config.clone()) {
        Ok(raw) => serde_norway::to_string(&raw),
        Err(_) => serde_norway::to_string(config),
    };
    let yaml = yaml.unwrap_or_else(|e| format!("# cannot write it as YAML: {e}\n{config}"));
    format!(
        "# version {}, hash {}\n{}",
        text(&answer["version"]),
        text(&answer["hash"]),
        yaml.trim_end()
    )
}

fn faults(answer: &Value, colour: bool) -> String {
    let mut table = Table::new(&[
        "ID",
        "ACTION",
        "STATE",
        "PERCENT",
        "INJECTED",
        "ACTIVE",
        "TIME_LEFT",
        "MATCH",
    ]);
    for fault in items(answer, "faults") {
        let mut matcher = fault["match"].clone();
        let headers = matcher
            .as_object_mut()
            .and_then(|m| m.remove("headers"))
            .map(|h| format!(" headers: {}", pairs(&h)));
        table.row(vec![
            text(&fault["id"]).into(),
            text(&fault["kind"]).into(),
            Cell::state(text(&fault["state"])),
            text(&fault["percent"]).into(),
            text(&fault["injected"]).into(),
            text(&fault["active_requests"]).into(),
            text(&fault["time_left"]).into(),
            format!("{}{}", pairs(&matcher), headers.unwrap_or_default()).into(),
        ]);
    }
    table.render(colour)
}

fn diffs(answer: &Value, colour: bool) -> String {
    let mut table = Table::new(&[
        "SEQ",
        "TIME",
        "ROUTE",
        "COPY",
        "DIFFERS",
        "SIMILARITY",
        "LATENCY_RATIO",
        "PRIMARY",
        "SHADOW",
    ]);
    let leg = |leg: &Value| format!("{} {}", text(&leg["cluster"]), text(&leg["status"]));
    let diffs = items(answer, "diffs");
    for diff in diffs {
        table.row(vec![
            text(&diff["seq"]).into(),
            time(&diff["time_ms"]).into(),
            text(&diff["route"]).into(),
            text(&diff["copy"]).into(),
            text(&diff["kinds"]).into(),
            text(&diff["similarity"]).into(),
            text(&diff["latency_ratio"]).into(),
            leg(&diff["primary"]).into(),
            leg(&diff["shadow"]).into(),
        ]);
    }
    format!(
        "{}\n({} shown, newest first; {} recorded, the last {} kept)",
        table.render(colour),
        diffs.len(),
        text(&answer["total"]),
        text(&answer["capacity"])
    )
}

/// `key  value` lines of an object, nested keys joined with dots and list
/// items numbered (`events[0].reason`); a state word in its colour.
pub(crate) fn fields(answer: &Value, colour: bool) -> String {
    let mut table = Table::new(&[]);
    flatten("", answer, &mut table);
    table.render(colour)
}

fn flatten(key: &str, value: &Value, table: &mut Table) {
    let join = |inner: &str| match key {
        "" => inner.to_string(),
        _ => format!("{key}.{inner}"),
    };
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                flatten(&join(k), v, table);
            }
        }
        Value::Array(items) if items.iter().any(|i| i.is_object() || i.is_array()) => {
            for (i, item) in items.iter().enumerate() {
                flatten(&format!("{key}[{i}]"), item, table);
            }
        }
        _ if key.is_empty() => table.row(vec![text(value).into()]),
        _ => {
            let cell = match key.rsplit('.').next() {
                Some("state" | "result") => Cell::state(text(value)),
                _ => Cell::from(text(value)),
            };
            table.row(vec![key.into(), cell]);
        }
    }
}

#[cfg(test)]
mod tests;
