//! One recording: its config, its queue and its writer thread, and what
//! the data plane hands it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use serde::Serialize;
use sluice_filters::{
    format_duration, format_rfc3339, Bodies, Failure, Operation, RedactError, Redactor,
    RequestRecord, Secret, SessionSampler, TokenOutcome, UpstreamTiming,
};

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::mpsc::{channel, Sender};

use super::ring::Recent;
use super::writer::{Files, Writer};
use super::{RecorderMetrics, Source};
use crate::config::RecorderConfig;
use crate::set_side_priority;

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

/// One finished request, owned, on its way to the writer. Its strings are
/// packed in one buffer: one allocation per request rather than ten, each
/// freed on the writer's thread.
#[derive(Debug)]
pub struct Captured {
    text: String,
    /// Where each [`Text`] field ends in `text`.
    ends: [u32; Text::COUNT],
    /// Which of the optional fields are present, by [`Text`] bit.
    present: u16,
    pub operation: Operation,
    pub status: u16,
    /// A gRPC call's `grpc-status`, when one came.
    pub grpc_status: Option<u32>,
    /// The serving endpoint's KV-cache usage, when scraped.
    pub kvcache_ratio: Option<f64>,
    /// When the request arrived, on the data plane's clock.
    pub arrived: Instant,
    pub arrived_wall: SystemTime,
    pub e2e: Duration,
    pub failure: Option<Failure>,
    pub tokens: Option<TokenOutcome>,
    /// The body's first chunks (refcounted, not copied), at most
    /// [`MAX_BODY`] in all; `body_cut` when there was more.
    pub body: Vec<Bytes>,
    pub body_cut: bool,
}

/// The string fields of a [`Captured`], in their order in its buffer.
#[derive(Clone, Copy)]
enum Text {
    RequestId,
    Route,
    Cluster,
    Version,
    Model,
    Method,
    Path,
    Fingerprint,
    TraceId,
    Session,
    LoadRun,
    LineageId,
    GrpcMethod,
}

impl Text {
    const COUNT: usize = 13;
}

/// What the data plane knows of a request beyond its record.
#[derive(Clone, Copy, Debug, Default)]
pub struct CaptureIds<'a> {
    /// The W3C trace id, 32 hex digits.
    pub trace_id: Option<&'a str>,
    /// The session header's value, as sent (redacted by the writer).
    pub session_id: Option<&'a str>,
    /// The lineage id of the cluster version that served it.
    pub lineage_id: Option<&'a str>,
}

impl Captured {
    /// The record of a request as the data plane finished it, with its ids,
    /// its arrival and its body's chunks.
    pub fn new(
        record: &RequestRecord<'_>,
        ids: CaptureIds<'_>,
        arrived: (Instant, SystemTime),
        body: Vec<Bytes>,
        body_cut: bool,
    ) -> Captured {
        let fields: [Option<&str>; Text::COUNT] = [
            Some(record.request_id),
            Some(record.route),
            Some(record.cluster),
            Some(record.version),
            Some(record.model),
            Some(record.method),
            Some(record.path),
            record.prompt_fingerprint,
            ids.trace_id,
            ids.session_id,
            record.load_run,
            ids.lineage_id,
            record.grpc_method,
        ];
        let mut text = String::with_capacity(fields.iter().flatten().map(|f| f.len()).sum());
        let mut ends = [0; Text::COUNT];
        let mut present = 0;
        for (i, field) in fields.iter().enumerate() {
            if let Some(f) = field {
                text.push_str(f);
                present |= 1 << i;
            }
            ends[i] = text.len() as u32;
        }
        Captured {
            text,
            ends,
            present,
            operation: record.operation,
            status: record.status,
            grpc_status: record.grpc_status,
            kvcache_ratio: record.kvcache_ratio,
            arrived: arrived.0,
            arrived_wall: arrived.1,
            e2e: record.e2e,
            failure: record.failure,
            tokens: record.tokens.cloned(),
            body,
            body_cut,
        }
    }

    fn text(&self, field: Text) -> &str {
        let i = field as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        self.text.get(start..self.ends[i] as usize).unwrap_or("")
    }

    fn optional(&self, field: Text) -> Option<&str> {
        (self.present & (1 << field as usize) != 0).then(|| self.text(field))
    }

    pub(super) fn trace_id(&self) -> Option<&str> {
        self.optional(Text::TraceId)
    }

    pub(super) fn session_id(&self) -> Option<&str> {
        self.optional(Text::Session)
    }

    pub(super) fn lineage_id(&self) -> Option<&str> {
        self.optional(Text::LineageId)
    }

    /// The record again, borrowed, for the trace line.
    pub(super) fn record(&self) -> RequestRecord<'_> {
        RequestRecord {
            request_id: self.text(Text::RequestId),
            route: self.text(Text::Route),
            cluster: self.text(Text::Cluster),
            version: self.text(Text::Version),
            model: self.text(Text::Model),
            operation: self.operation,
            method: self.text(Text::Method),
            path: self.text(Text::Path),
            status: self.status,
            e2e: self.e2e,
            failure: self.failure,
            tokens: self.tokens.as_ref(),
            prompt_fingerprint: self.optional(Text::Fingerprint),
            upstream: UpstreamTiming::default(),
            load_run: self.optional(Text::LoadRun),
            grpc_status: self.grpc_status,
            grpc_method: self.optional(Text::GrpcMethod),
            kvcache_ratio: self.kvcache_ratio,
        }
    }
}

/// What the writer sends.
// Lines are not boxed: the queue's slots are allocated once, and a box
// would be one more allocation per request, freed on another thread.
#[allow(clippy::large_enum_variant)]
pub(super) enum Message {
    Line(Captured),
    /// Write what is queued, close the files and end.
    Stop,
}

/// The counts of one recording, shared with its writer, and its stop.
#[derive(Debug, Default)]
pub(super) struct Counts {
    /// Set by a stop: the writer ends once the queue is empty, even when the
    /// stop found the queue full and could not queue [`Message::Stop`].
    pub(super) stopping: AtomicBool,
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
    tx: Sender<Message>,
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
        recent: Arc<Recent>,
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
        // tokio's channel, not std's: a std `try_send` spins (yielding) on a
        // slot the receiver has claimed and not yet read, so a writer
        // preempted mid-read at idle priority held the proxy thread too
        // (33.7 against 25.8 µs of CPU per request). tokio's senders never
        // wait on the receiver.
        let (tx, rx) = channel(QUEUE);
        let priority = config.priority;
        let writer = Writer {
            rx,
            files,
            redactor,
            bodies: config.bodies,
            started,
            counts: counts.clone(),
            metrics: metrics.clone(),
            recent,
        };
        let handle = std::thread::Builder::new()
            .name("sluice-recorder".into())
            .spawn(move || {
                set_side_priority(priority, "recorder writer");
                writer.run()
            })
            .map_err(StartError::Thread)?;
        Ok(Capture {
            deadline: config.ttl.map(|ttl| tokio::time::Instant::now() + ttl),
            sampler: SessionSampler::new(config.percent, rand::random(), SESSION_SALT),
            config,
            source,
            started,
            started_wall,
            tx,
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
        if self.counts.stopping.load(Ordering::Relaxed) {
            return;
        }
        match self.tx.try_send(Message::Line(captured)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.counts
                    .dropped_queue_full
                    .fetch_add(1, Ordering::Relaxed);
                self.metrics.dropped_queue_full.inc();
            }
            // The writer ended on a stop a moment ago.
            Err(TrySendError::Closed(_)) => {}
        }
    }

    /// Writes what is queued, closes the files and joins the writer. Lines
    /// submitted after this are not written.
    pub(super) fn stop(&self) {
        if self.counts.stopping.swap(true, Ordering::Relaxed) {
            return;
        }
        // Wakes a parked writer; a full queue means a busy writer, which
        // sees `stopping` once it has emptied the queue.
        let _ = self.tx.try_send(Message::Stop);
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
        if !self.counts.stopping.swap(true, Ordering::Relaxed) {
            let _ = self.tx.try_send(Message::Stop);
        }
    }
}
