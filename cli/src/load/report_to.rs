//! `sluice load --report-to URL`: the run's live summary pushed to a sluice
//! control API (`POST /v1/load-runs`, the token of `sluice ctl`) every 2 s
//! from a thread of its own, so that a slow or dead API never delays the
//! timer or the dispatch. Each push has [`PUSH_TIMEOUT`]; a failed one is
//! counted and the first said on stderr, never fatal. The last push, once
//! the result is made, says how the run ended.

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use sluice_cli::ctl::{self, AdminToken};
use sluice_control::ApiEndpoint;
use sluice_filters::{format_rfc3339, LoadRun};
use sluice_workload::Live;

use super::progress::{Stderr, EVERY};
use super::snapshot::{load_run, Rates, RunMeta, Settled, Shape, Snapshot};

/// The most one push may take.
pub(crate) const PUSH_TIMEOUT: Duration = Duration::from_secs(1);

/// Where to push: `--report-to`, and `--token` or `SLUICE_ADMIN_TOKEN`.
#[derive(Clone, Copy)]
pub(crate) struct ReportTo<'a> {
    pub(crate) url: &'a str,
    pub(crate) token: &'a AdminToken,
}

/// What the pushes came to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Pushes {
    pub(crate) made: u64,
    pub(crate) failed: u64,
}

/// `--report-to`: an `http://` base URL (a path prefix is kept), without
/// its trailing `/`.
pub(crate) fn url(text: &str) -> Result<String, String> {
    let uri: http::Uri = text
        .parse()
        .map_err(|e| format!("`{text}` is not a URL: {e}"))?;
    if uri.scheme_str() != Some("http") || uri.authority().is_none() {
        return Err(format!(
            "`{text}` is not an http:// URL (the control API is plain http; https is not supported)"
        ));
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// Pushes now and every 2 s until `settled` gives the run's end (then the
/// last push) or is dropped (the run failed: nothing more to say). Bounded
/// by the run's length and an hour of setup and drain.
pub(crate) fn push_until_settled(
    to: ReportTo<'_>,
    shape: &Shape<'_>,
    live: &Live,
    meta: &RunMeta,
    settled: &Receiver<Settled>,
    out: &Stderr,
) -> Pushes {
    let mut pushes = Pushes::default();
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        out.say("load: --report-to: cannot start its runtime; nothing is pushed");
        return pushes;
    };
    let mut before = Snapshot::default();
    let next = |before: &mut Snapshot| {
        let now = shape.take(live);
        let run = load_run(
            meta,
            &now,
            Rates::between(before, &now),
            format_rfc3339(super::unix_us()),
        );
        *before = now;
        run
    };
    let span = Duration::from_micros(shape.span_us()) + Duration::from_secs(3600);
    let most = span.as_millis() / EVERY.as_millis() + 1;
    let mut last: Option<Instant> = None;
    for _ in 0..most {
        let wait = last.map_or(Duration::ZERO, |l| EVERY.saturating_sub(l.elapsed()));
        match settled.recv_timeout(wait) {
            Ok(end) => {
                let mut run = next(&mut before);
                end.settle(&mut run);
                push(&runtime, to, &run, &mut pushes, out);
                break;
            }
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {
                last = Some(Instant::now());
                let run = next(&mut before);
                push(&runtime, to, &run, &mut pushes, out);
            }
        }
    }
    pushes
}

/// One push, counted; the first failure is said.
fn push(
    runtime: &tokio::runtime::Runtime,
    to: ReportTo<'_>,
    run: &LoadRun,
    pushes: &mut Pushes,
    out: &Stderr,
) {
    pushes.made += 1;
    let why = match serde_json::to_string(run) {
        Err(e) => format!("cannot write the summary: {e}"),
        Ok(body) => {
            let endpoint = ApiEndpoint::PutLoadRun;
            let path = endpoint.path(&[]);
            let call = ctl::call(to.url, to.token, endpoint.method(), &path, Some(body));
            match runtime.block_on(async { tokio::time::timeout(PUSH_TIMEOUT, call).await }) {
                Ok(Ok((status, _))) if status.is_success() => return,
                Ok(Ok((status, text))) => format!("{status}: {}", answer_error(&text)),
                Ok(Err(e)) => format!("{e:#}"),
                Err(_) => format!(
                    "no answer within {}",
                    sluice_filters::format_duration(PUSH_TIMEOUT)
                ),
            }
        }
    };
    pushes.failed += 1;
    if pushes.failed == 1 {
        out.say(&format!(
            "load: --report-to {}: a push failed ({why}); the load goes on, and later failures are only counted",
            to.url
        ));
    }
}

/// The control API's `{"error": ...}`, or the answer's start.
fn answer_error(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_owned))
        .unwrap_or_else(|| text.chars().take(200).collect())
}

#[cfg(test)]
mod tests;
