//! The audit log as JSON lines in `admin.audit_file`: each API change as
//! one line (which token, method, path, status, a summary and the events it
//! made), every other event on its own line. Lines are queued without
//! waiting and written by a task of their own off the control thread; a
//! full queue or a failed write is logged and counted, never fatal.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use prometheus::{IntCounterVec, Registry};
use serde::Serialize;
use sluice_filters::register_family;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::events::Event;

pub const AUDIT_ERRORS_METRIC: &str = "sluice_admin_audit_errors_total";
/// Lines queued for the writer; past it a line is dropped and counted.
const QUEUE: usize = 4096;
/// Lines written per trip to the blocking pool.
const BATCH: usize = 256;

/// One API request that tried a change.
#[derive(Serialize)]
pub(crate) struct ChangeLine<'a> {
    pub time_ms: u64,
    /// The name of the token that made the request.
    pub token: &'a str,
    pub peer: String,
    pub method: &'a str,
    pub path: &'a str,
    pub status: u16,
    /// The actions of the events it made, or why none was made.
    pub summary: String,
    pub events: &'a [Event],
}

#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Line<'a> {
    Change(&'a ChangeLine<'a>),
    Event(&'a Event),
}

/// The sending side: cheap to call from any thread.
pub(crate) struct AuditFile {
    lines: mpsc::Sender<String>,
    errors: IntCounterVec,
}

/// The receiving side, run by the control plane until cancelled.
pub(crate) struct AuditWriter {
    path: PathBuf,
    lines: mpsc::Receiver<String>,
    errors: IntCounterVec,
}

pub(crate) fn audit_file(
    path: PathBuf,
    registry: &Registry,
) -> Result<(Arc<AuditFile>, AuditWriter), prometheus::Error> {
    let errors: IntCounterVec = register_family(
        registry,
        AUDIT_ERRORS_METRIC,
        "Audit lines not written to admin.audit_file, by reason (full, write).",
        &["reason"],
    )?;
    let (tx, rx) = mpsc::channel(QUEUE);
    let file = AuditFile {
        lines: tx,
        errors: errors.clone(),
    };
    let writer = AuditWriter {
        path,
        lines: rx,
        errors,
    };
    Ok((Arc::new(file), writer))
}

impl AuditFile {
    pub(crate) fn append_change(&self, change: &ChangeLine<'_>) {
        self.append(&Line::Change(change));
    }

    pub(crate) fn append_event(&self, event: &Event) {
        self.append(&Line::Event(event));
    }

    fn append(&self, line: &Line<'_>) {
        let Ok(mut text) = serde_json::to_string(line) else {
            return;
        };
        text.push('\n');
        if self.lines.try_send(text).is_err() {
            self.errors.with_label_values(&["full"]).inc();
            warn!("audit file queue full; a line was dropped");
        }
    }
}

impl AuditWriter {
    /// Writes lines as they come until `cancel`, then what is still queued.
    pub(crate) async fn run(mut self, cancel: CancellationToken) {
        let mut file: Option<File> = None;
        loop {
            let first = tokio::select! {
                () = cancel.cancelled() => None,
                line = self.lines.recv() => line,
            };
            let Some(first) = first else { break };
            let mut batch = first;
            for _ in 1..BATCH {
                match self.lines.try_recv() {
                    Ok(line) => batch.push_str(&line),
                    Err(_) => break,
                }
            }
            file = self.write(file, batch).await;
        }
        let mut rest = String::new();
        while let Ok(line) = self.lines.try_recv() {
            rest.push_str(&line);
        }
        if !rest.is_empty() {
            self.write(file, rest).await;
        }
    }

    /// Appends `batch` on the blocking pool; the file stays open between
    /// batches, and is opened again after a failed write.
    async fn write(&self, file: Option<File>, batch: String) -> Option<File> {
        let path = self.path.clone();
        let written = tokio::task::spawn_blocking(move || {
            let mut file = match file {
                Some(f) => f,
                None => OpenOptions::new().create(true).append(true).open(&path)?,
            };
            file.write_all(batch.as_bytes())?;
            Ok::<File, std::io::Error>(file)
        })
        .await;
        match written {
            Ok(Ok(file)) => Some(file),
            Ok(Err(e)) => {
                warn!(path = %self.path.display(), error = %e, "audit file write failed");
                self.errors.with_label_values(&["write"]).inc();
                None
            }
            Err(e) => {
                warn!(error = %e, "audit file writer failed");
                self.errors.with_label_values(&["write"]).inc();
                None
            }
        }
    }
}

#[cfg(test)]
mod tests;
