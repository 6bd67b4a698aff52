//! One recording: its config, its queue and its writer thread, and what
//! the data plane hands it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use serde::Serialize;
use sluice_filters::{
    format_duration, format_rfc3339, Bodies, Failure, Operation, RedactError, Redactor,
    RequestRecord, Secret, SessionSampler, TokenOutcome, UpstreamTiming,
};

use super::writer::{Files, Writer};
use super::{RecorderMetrics, Source};
use crate::config::RecorderConfig;

/// Lines waiting for the writer at most; more are dropped and counted.
const QUEUE: usize = 8192;
/// Keeps recorder sampling independent of the mirror's and the sticky pick.
const SESSION_SALT: u64 = 0x7265_636f_7264_6572;
/// The most of a request body a line keeps (pingora's retry buffer, which
/// is also what the token meter scans).
pub const MAX_BODY: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("redaction.key_env: environment variable `{0}` is not set")]
    KeyEnv(String),
    #[error("redaction: {0}")]
    Redaction(#[from] RedactError),
    #[error("path: {path}: {source}")]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writer thread: {0}")]
    Thread(#[source] std::io::Error),
}

impl StartError {
    /// The field of `recorder` the error is about.
    pub fn field(&self) -> &'static str {
        match self {
            StartError::KeyEnv(_) => "redaction.key_env",
            StartError::Redaction(_) => "redaction.patterns",
            StartError::File { .. } | StartError::Thread(_) => "path",
        }
    }
}

/// One finished request, owned, on its way to the writer.
#[derive(Debug)]
pub struct Captured {
    pub request_id: String,
    pub trace_id: Option<String>,
    /// The session header's value, as sent (redacted by the writer).
    pub session_id: Option<String>,
    pub route: String,
    pub cluster: String,
    pub version: String,
    pub model: String,
    pub operation: Operation,
    pub method: String,
    pub path: String,
    pub status: u16,
    /// When the request arrived, on the data plane's clock.
    pub arrived: Instant,
    pub arrived_wall: SystemTime,
    pub e2e: Duration,
    pub failure: Option<Failure>,
    pub tokens: Option<TokenOutcome>,
    pub prompt_fingerprint: Option<String>,
    /// The body's first chunks (refcounted, not copied), at most
    /// [`MAX_BODY`] in all; `body_cut` when there was more.
    pub body: Vec<Bytes>,
    pub body_cut: bool,
}

impl Captured {
    /// The record of a request as the data plane finished it. The caller
    /// adds the ids, the session, the times and the body.
    pub fn of(record: &RequestRecord<'_>, arrived: Instant, arrived_wall: SystemTime) -> Captured {
        Captured {
            request_id: record.request_id.to_owned(),
            trace_id: None,
            session_id: None,
            route: record.route.to_owned(),
            cluster: record.cluster.to_owned(),
            version: record.version.to_owned(),
            model: record.model.to_owned(),
            operation: record.operation,
            method: record.method.to_owned(),
            path: record.path.to_owned(),
            status: record.status,
            arrived,
            arrived_wall,
            e2e: record.e2e,
            failure: record.failure,
            tokens: record.tokens.cloned(),
            prompt_fingerprint: record.prompt_fingerprint.map(str::to_owned),
            body: Vec::new(),
            body_cut: false,
        }
    }

    /// The record again, borrowed, for the trace line.
    pub(super) fn record(&self) -> RequestRecord<'_> {
        RequestRecord {
            request_id: &self.request_id,
            route: &self.route,
            cluster: &self.cluster,
            version: &self.version,
            model: &self.model,
            operation: self.operation,
            method: &self.method,
            path: &self.path,
            status: self.status,
            e2e: self.e2e,
            failure: self.failure,
            tokens: self.tokens.as_ref(),
            prompt_fingerprint: self.prompt_fingerprint.as_deref(),
            upstream: UpstreamTiming::default(),
        }
    }
}

/// What the writer sends.
pub(super) enum Message {
    Line(Box<Captured>),
    /// Write what is queued, close the files and end.
    Stop,
}

/// The counts of one recording, shared with its writer.
#[derive(Debug, Default)]
pub(super) struct Counts {
    pub(super) lines: AtomicU64,
    pub(super) bytes: AtomicU64,
    pub(super) dropped_queue_full: AtomicU64,
    pub(super) dropped_max_bytes: AtomicU64,
    pub(super) dropped_write_error: AtomicU64,
    pub(super) files: AtomicU64,
}

/// A running (or just stopped) recording.
pub struct Capture {
    config: RecorderConfig,
    source: Source,
    started: Instant,
    started_wall: SystemTime,
    deadline: Option<tokio::time::Instant>,
    sampler: SessionSampler,
    tx: SyncSender<Message>,
    stopped: AtomicBool,
    counts: Arc<Counts>,
    metrics: RecorderMetrics,
    writer: Mutex<Option<JoinHandle<()>>>,
}

/// `GET /v1/recorder`: what a recording is doing.
#[derive(Clone, Debug, Serialize)]
pub struct CaptureStatus {
    pub source: Source,
    pub path: String,
    pub started: String,
    /// `None` without a ttl.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_left: Option<String>,
    pub percent: f64,
    pub bodies: &'static str,
    pub routes: Vec<String>,
    pub lines: u64,
    pub bytes: u64,
    pub files: u64,
    pub dropped_queue_full: u64,
    pub dropped_max_bytes: u64,
    pub dropped_write_error: u64,
}

impl Capture {
    /// Opens the first file and starts the writer. An existing file at the
    /// path is never appended to or overwritten: it is moved aside to the
    /// next free rotation number first.
    pub(super) fn start(
        config: RecorderConfig,
        source: Source,
        metrics: RecorderMetrics,
    ) -> Result<Capture, StartError> {
        let secret = match &config.key_env {
            Some(var) => Secret::new(
                std::env::var(var)
                    .map_err(|_| StartError::KeyEnv(var.clone()))?
                    .into_bytes(),
            ),
            None => Secret::new(rand::random::<[u8; 32]>()),
        };
        let redactor = Redactor::new(&config.redaction, secret)?;
        let files = Files::open(&config).map_err(|source| StartError::File {
            path: config.path.clone(),
            source,
        })?;
        // The data plane stamps arrivals with std's clock, which the
        // offsets in the trace must share; tokio's paused clock does not
        // move it.
        #[allow(clippy::disallowed_methods)]
        let started = Instant::now();
        let started_wall = SystemTime::now();
        let counts = Arc::new(Counts::default());
        counts.files.store(1, Ordering::Relaxed);
        let (tx, rx) = sync_channel(QUEUE);
        let writer = Writer {
            rx,
            files,
            redactor,
            bodies: config.bodies,
            started,
            counts: counts.clone(),
            metrics: metrics.clone(),
        };
        let handle = std::thread::Builder::new()
            .name("sluice-recorder".into())
            .spawn(move || writer.run())
            .map_err(StartError::Thread)?;
        Ok(Capture {
            deadline: config.ttl.map(|ttl| tokio::time::Instant::now() + ttl),
            sampler: SessionSampler::new(config.percent, rand::random(), SESSION_SALT),
            config,
            source,
            started,
            started_wall,
            tx,
            stopped: AtomicBool::new(false),
            counts,
            metrics,
            writer: Mutex::new(Some(handle)),
        })
    }

    pub fn config(&self) -> &RecorderConfig {
        &self.config
    }

    pub fn source(&self) -> Source {
        self.source
    }

    pub(super) fn deadline(&self) -> Option<tokio::time::Instant> {
        self.deadline
    }

    /// Whether a request of `route`, whose session header (see
    /// [`RecorderConfig::session_header`]) has the value `session`, is
    /// recorded.
    pub fn keeps(&self, route: &str, session: Option<&[u8]>) -> bool {
        self.config.records(route) && self.sampler.keeps(session)
    }

    /// Queues one request's line; drops it (counted) when the queue is full.
    pub fn submit(&self, captured: Captured) {
        if self.stopped.load(Ordering::Relaxed) {
            return;
        }
        match self.tx.try_send(Message::Line(Box::new(captured))) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.counts
                    .dropped_queue_full
                    .fetch_add(1, Ordering::Relaxed);
                self.metrics
                    .dropped
                    .with_label_values(&["queue_full"])
                    .inc();
            }
            // The writer ended on a stop a moment ago.
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Writes what is queued, closes the files and joins the writer. Lines
    /// submitted after this are not written.
    pub(super) fn stop(&self) {
        if self.stopped.swap(true, Ordering::Relaxed) {
            return;
        }
        // A blocking send: the writer drains the queue, so there is room soon.
        let _ = self.tx.send(Message::Stop);
        let handle = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }

    pub fn status(&self) -> CaptureStatus {
        let c = &self.counts;
        let count = |n: &AtomicU64| n.load(Ordering::Relaxed);
        let wall_us = self
            .started_wall
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        CaptureStatus {
            source: self.source,
            path: self.config.path.display().to_string(),
            started: format_rfc3339(wall_us),
            time_left: self.deadline.map(|at| {
                let left = at.saturating_duration_since(tokio::time::Instant::now());
                // Whole seconds, rounded up: a fresh 10m ttl shows `10m`.
                let whole = left.as_secs() + u64::from(left.subsec_nanos() > 0);
                format_duration(Duration::from_secs(whole))
            }),
            percent: self.config.percent,
            bodies: match self.config.bodies {
                Bodies::None => "none",
                Bodies::Redacted => "redacted",
                Bodies::Full => "full",
            },
            routes: self.config.routes.clone(),
            lines: count(&c.lines),
            bytes: count(&c.bytes),
            files: count(&c.files),
            dropped_queue_full: count(&c.dropped_queue_full),
            dropped_max_bytes: count(&c.dropped_max_bytes),
            dropped_write_error: count(&c.dropped_write_error),
        }
    }

    /// When the recording started, on the data plane's clock.
    pub fn started(&self) -> Instant {
        self.started
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        // Not stopped through the slot (a test, a panic): let the writer
        // finish on its own, without waiting for it here.
        if !self.stopped.swap(true, Ordering::Relaxed) {
            let _ = self.tx.try_send(Message::Stop);
        }
    }
}
