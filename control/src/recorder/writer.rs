//! The writer thread of one recording: builds each trace line (redaction,
//! block hashes, think time, JSON) and appends it to the current file,
//! rotating by size and stopping at the recording's size limit.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bytes::BytesMut;
use sluice_filters::{Bodies, Redactor, ThinkTimes, TraceInput, TraceLine};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::mpsc::Receiver;

use super::capture::{Captured, Counts, Message};
use super::ring::{Kept, Recent};
use super::{RecorderMetrics, DRAIN_EVERY};
use crate::config::RecorderConfig;

/// Lines are written to the file in writes of this much (a few hundred
/// lines), so a busy recording makes few system calls.
const WRITE_BUFFER: usize = 256 * 1024;
/// Sessions whose last request is remembered for think times.
const SESSIONS: usize = 100_000;

/// The files of one recording: `path` is written, `path.1`, `path.2`, ...
/// are the full ones, oldest first.
pub(super) struct Files {
    path: PathBuf,
    out: BufWriter<File>,
    /// Bytes in the current file.
    in_file: u64,
    /// Bytes in every file of this recording.
    total: u64,
    rotate_bytes: u64,
    max_bytes: u64,
    /// The number the current file gets when it is rotated.
    next: u32,
}

impl Files {
    /// Opens `config.path` new. A file already there (an earlier recording)
    /// is moved to the next free `PATH.N` first.
    pub(super) fn open(config: &RecorderConfig) -> io::Result<Files> {
        let path = config.path.clone();
        let mut next = next_free(&path);
        if std::fs::metadata(&path).is_ok_and(|m| m.len() > 0) {
            std::fs::rename(&path, numbered(&path, next))?;
            next += 1;
        }
        let out = BufWriter::with_capacity(WRITE_BUFFER, create(&path)?);
        Ok(Files {
            path,
            out,
            in_file: 0,
            total: 0,
            rotate_bytes: config.rotate_bytes,
            max_bytes: config.max_bytes,
            next,
        })
    }

    /// Appends one line (with its newline). `Ok(false)`: the recording's
    /// size limit would be passed; nothing was written.
    fn write(&mut self, line: &[u8], counts: &Counts) -> io::Result<bool> {
        let len = line.len() as u64;
        if self.total + len > self.max_bytes {
            return Ok(false);
        }
        if self.in_file > 0 && self.in_file + len > self.rotate_bytes {
            self.rotate()?;
            counts.files.fetch_add(1, Ordering::Relaxed);
        }
        self.out.write_all(line)?;
        self.in_file += len;
        self.total += len;
        Ok(true)
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.out.flush()?;
        std::fs::rename(&self.path, numbered(&self.path, self.next))?;
        self.next += 1;
        self.out = BufWriter::with_capacity(WRITE_BUFFER, create(&self.path)?);
        self.in_file = 0;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

fn create(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)
}

/// `trace.jsonl` → `trace.jsonl.3`.
pub(super) fn numbered(path: &Path, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// The first N from 1 with no `PATH.N` at or after it.
fn next_free(path: &Path) -> u32 {
    let mut n = 1;
    while numbered(path, n).exists() {
        n += 1;
    }
    n
}

pub(super) struct Writer {
    pub(super) rx: Receiver<Message>,
    pub(super) files: Files,
    pub(super) redactor: Redactor,
    pub(super) bodies: Bodies,
    pub(super) started: Instant,
    pub(super) counts: Arc<Counts>,
    pub(super) metrics: RecorderMetrics,
    pub(super) recent: Arc<Recent>,
}

impl Writer {
    /// Waits for a line; then, while lines keep coming, drains the queue
    /// every [`DRAIN_EVERY`] without blocking on it, so that a busy data
    /// plane's `try_send` never has a sleeping writer to wake.
    pub(super) fn run(mut self) {
        let mut think = ThinkTimes::new(SESSIONS);
        let mut line = Vec::with_capacity(4096);
        'idle: loop {
            // Parked only on an empty queue: a stop that found the queue
            // full (and could not queue `Stop`) is seen here.
            if self.counts.stopping.load(Ordering::Relaxed) && self.rx.is_empty() {
                break;
            }
            let Some(first) = self.rx.blocking_recv() else {
                break;
            };
            let mut next = Some(first);
            loop {
                let mut handled = 0;
                while let Some(message) = next.take() {
                    match message {
                        Message::Line(captured) => {
                            self.write(&captured, &mut think, &mut line);
                            handled += 1;
                        }
                        Message::Stop => break 'idle,
                    }
                    next = match self.rx.try_recv() {
                        Ok(m) => Some(m),
                        Err(TryRecvError::Empty) => None,
                        Err(TryRecvError::Disconnected) => break 'idle,
                    };
                }
                self.flush();
                if handled == 0 {
                    continue 'idle;
                }
                std::thread::sleep(DRAIN_EVERY);
                next = match self.rx.try_recv() {
                    Ok(m) => Some(m),
                    Err(TryRecvError::Empty) => continue 'idle,
                    Err(TryRecvError::Disconnected) => break 'idle,
                };
            }
        }
        self.flush();
    }

    fn write(&mut self, captured: &Captured, think: &mut ThinkTimes, line: &mut Vec<u8>) {
        let arrival = captured.arrived.saturating_duration_since(self.started);
        let think_time = captured
            .session_id()
            .and_then(|s| think.observe(s, arrival, arrival + captured.e2e));
        let body = joined_body(captured);
        let record = captured.record();
        let wall_unix_us = captured
            .arrived_wall
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        let input = TraceInput {
            record: &record,
            arrival,
            wall_unix_us,
            trace_id: captured.trace_id(),
            session_id: captured.session_id(),
            lineage_id: captured.lineage_id(),
            think_time,
            body: body.as_deref(),
            bodies: self.bodies,
        };
        let trace_line = TraceLine::from_record(&input, &self.redactor);
        line.clear();
        // Every field serialises (strings, numbers, bools, raw JSON).
        if serde_json::to_writer(&mut *line, &trace_line).is_err() {
            return;
        }
        // Kept for feedback scenarios (with `feedback:` only) whether or
        // not the file takes it: a recording past its `max_bytes` still
        // remembers its last lines.
        if self.recent.enabled() {
            self.recent.push(Kept {
                wall_us: wall_unix_us,
                route: record.route.to_owned(),
                cluster: record.cluster.to_owned(),
                status: Some(record.status),
                line: line.clone(),
            });
        }
        line.push(b'\n');
        let dropped = match self.files.write(line, &self.counts) {
            Ok(true) => {
                self.counts.lines.fetch_add(1, Ordering::Relaxed);
                self.counts
                    .bytes
                    .fetch_add(line.len() as u64, Ordering::Relaxed);
                self.metrics.lines.inc();
                self.metrics.bytes.inc_by(line.len() as u64);
                return;
            }
            Ok(false) => ("max_bytes", &self.counts.dropped_max_bytes),
            Err(e) => {
                tracing::warn!(error = %e, "recorder: a trace line could not be written");
                ("write_error", &self.counts.dropped_write_error)
            }
        };
        bump(dropped.1);
        self.metrics.dropped.with_label_values(&[dropped.0]).inc();
    }

    fn flush(&mut self) {
        if let Err(e) = self.files.flush() {
            tracing::warn!(error = %e, "recorder: the trace file could not be flushed");
        }
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// The body as one slice, when it was captured whole; `None` when the
/// recording keeps no bodies or the body was cut (a cut JSON body cannot be
/// redacted key by key, nor its prompt read).
fn joined_body(captured: &Captured) -> Option<Vec<u8>> {
    if captured.body_cut || captured.body.is_empty() {
        return None;
    }
    let mut joined = BytesMut::with_capacity(captured.body.iter().map(|b| b.len()).sum());
    for chunk in &captured.body {
        joined.extend_from_slice(chunk);
    }
    Some(joined.to_vec())
}
