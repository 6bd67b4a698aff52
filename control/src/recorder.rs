//! The traffic recorder: at most one recording at a time, started by the
//! config's `recorder:` or by `PUT /v1/recorder` (with a `ttl`), stopped by
//! `DELETE /v1/recorder`, by its ttl, or when the config drops it. The last
//! of these to happen wins.
//!
//! The data plane asks [`Recorder::current`] once per request (one atomic
//! load), decides on the route and the session with [`Capture::keeps`], and
//! at the end of the request hands an owned [`Captured`] to
//! [`Capture::submit`]: a `try_send` on a bounded queue. Everything else —
//! redaction, the prompt's block hashes, think times, JSON, the files — is
//! done by the recording's writer thread (`writer.rs`), never on the request
//! path. A full queue drops the line and counts it.

mod capture;
mod ring;
mod writer;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use prometheus::{IntCounter, IntCounterVec, Registry};
use serde::Serialize;
use sluice_filters::register_family;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::RecorderConfig;
use crate::events::EventLog;
use crate::store::SnapshotStore;

pub(crate) use capture::StartError;
pub use capture::{Capture, CaptureIds, CaptureStatus, Captured, MAX_BODY};
#[cfg(test)]
pub(crate) use ring::Kept;
pub(crate) use ring::{Cut, Recent};

pub const LINES_METRIC: &str = "sluice_recorder_lines_total";
pub const DROPPED_METRIC: &str = "sluice_recorder_dropped_total";
pub const BYTES_METRIC: &str = "sluice_recorder_bytes_total";

/// Who started a recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Config,
    Api,
}

/// The recorder's Prometheus counters, across recordings.
#[derive(Clone, Debug)]
pub(crate) struct RecorderMetrics {
    pub lines: IntCounter,
    /// By `reason`: `queue_full`, `max_bytes`, `write_error`.
    pub dropped: IntCounterVec,
    /// `dropped{reason="queue_full"}`, resolved once: it is counted on the
    /// request path.
    pub dropped_queue_full: IntCounter,
    pub bytes: IntCounter,
}

impl RecorderMetrics {
    fn register(registry: &Registry) -> Result<RecorderMetrics, prometheus::Error> {
        let lines: IntCounterVec =
            register_family(registry, LINES_METRIC, "Trace lines written.", &[])?;
        let bytes: IntCounterVec =
            register_family(registry, BYTES_METRIC, "Trace bytes written.", &[])?;
        let dropped: IntCounterVec = register_family(
            registry,
            DROPPED_METRIC,
            "Trace lines not written, by reason.",
            &["reason"],
        )?;
        Ok(RecorderMetrics {
            lines: lines.with_label_values::<&str>(&[]),
            dropped_queue_full: dropped.with_label_values(&["queue_full"]),
            dropped,
            bytes: bytes.with_label_values::<&str>(&[]),
        })
    }
}

/// The one slot of the running recording.
pub struct Recorder {
    current: ArcSwapOption<Capture>,
    /// Serialises starts and stops, so that a stop never joins a writer
    /// another start has just replaced.
    change: Mutex<()>,
    metrics: RecorderMetrics,
    /// Bumped on every start and stop: the ttl task re-reads the deadline.
    changes: watch::Sender<u64>,
    /// The last lines written, across recordings, for feedback scenarios.
    recent: Arc<Recent>,
}

impl Recorder {
    pub fn new(registry: &Registry) -> Result<Arc<Recorder>, prometheus::Error> {
        Ok(Arc::new(Recorder {
            current: ArcSwapOption::empty(),
            change: Mutex::new(()),
            metrics: RecorderMetrics::register(registry)?,
            changes: watch::Sender::new(0),
            recent: Arc::new(Recent::default()),
        }))
    }

    /// The running recording, if any.
    pub fn current(&self) -> Option<Arc<Capture>> {
        self.current.load_full()
    }

    /// The last lines written (redacted), for a breach's window.
    pub(crate) fn recent(&self) -> &Recent {
        &self.recent
    }

    /// Whether a recording runs: cheaper than [`Recorder::current`] for a
    /// request that only needs to know.
    pub fn is_recording(&self) -> bool {
        self.current.load().is_some()
    }

    /// Starts a recording, stopping (and finishing the files of) the one
    /// that ran.
    pub fn start(
        &self,
        config: RecorderConfig,
        source: Source,
    ) -> Result<CaptureStatus, StartError> {
        let _guard = self.change.lock().unwrap_or_else(|p| p.into_inner());
        let capture = Arc::new(Capture::start(
            config,
            source,
            self.metrics.clone(),
            self.recent.clone(),
        )?);
        let status = capture.status();
        if let Some(old) = self.current.swap(Some(capture)) {
            old.stop();
        }
        self.changes.send_modify(|n| *n += 1);
        Ok(status)
    }

    /// Stops the running recording: its queued lines are written and its
    /// files closed before this returns. `None` when none ran.
    pub fn stop(&self) -> Option<CaptureStatus> {
        let _guard = self.change.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.current.swap(None)?;
        old.stop();
        self.changes.send_modify(|n| *n += 1);
        Some(old.status())
    }

    /// Stops the recording if it is `capture` (and not one started since).
    fn stop_if(&self, capture: &Arc<Capture>) -> Option<CaptureStatus> {
        let running = self.current();
        match running {
            Some(c) if Arc::ptr_eq(&c, capture) => self.stop(),
            _ => None,
        }
    }
}

/// Ends a recording at its ttl, and follows the config's `recorder:`: a
/// config (at start, or after a change) whose section differs from the one
/// last seen starts its recording, or stops the running one when the
/// section was removed.
pub(crate) async fn run_recorder(
    recorder: Arc<Recorder>,
    store: Arc<SnapshotStore>,
    events: Arc<EventLog>,
    cancel: CancellationToken,
) {
    let mut configs = store.subscribe();
    let mut changes = recorder.changes.subscribe();
    let mut seen = None;
    loop {
        let snapshot = store.load();
        recorder
            .recent
            .set_enabled(snapshot.config.feedback.is_some());
        let written = snapshot.config.raw.recorder.clone();
        if written != seen {
            seen = written;
            follow_config(
                &recorder,
                snapshot.config.recorder.clone(),
                &events,
                snapshot.version,
            );
        }
        let capture = recorder.current();
        let deadline = capture.as_ref().and_then(|c| c.deadline());
        let expiry = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = configs.changed() => {}
            _ = changes.changed() => {}
            _ = expiry => {
                if let Some(c) = &capture {
                    if recorder.stop_if(c).is_some() {
                        events.push("recorder", "recording ended: ttl", snapshot.version, Vec::new());
                    }
                }
            }
        }
    }
    // The process is stopping: finish the files.
    recorder.stop();
}

fn follow_config(
    recorder: &Recorder,
    config: Option<RecorderConfig>,
    events: &EventLog,
    version: u64,
) {
    match config {
        Some(config) => {
            let path = config.path.display().to_string();
            match recorder.start(config, Source::Config) {
                Ok(_) => events.push(
                    "config",
                    &format!("start recorder {path}"),
                    version,
                    Vec::new(),
                ),
                Err(e) => {
                    tracing::error!(error = %e, "the config's recorder did not start");
                    events.push(
                        "config",
                        &format!("start recorder {path}"),
                        version,
                        vec![format!("recorder: {e}")],
                    );
                }
            }
        }
        None => {
            if recorder
                .current()
                .is_some_and(|c| c.source() == Source::Config)
                && recorder.stop().is_some()
            {
                events.push("config", "stop recorder", version, Vec::new());
            }
        }
    }
}

/// How long the writer waits between draining the queue while lines keep
/// coming: long enough that a busy proxy never wakes it, short enough that
/// the queue (8192 lines) does not fill at 100k lines/s.
pub(crate) const DRAIN_EVERY: Duration = Duration::from_millis(2);

#[cfg(test)]
mod tests;
