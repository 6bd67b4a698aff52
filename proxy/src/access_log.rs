//! The structured access log: one JSON line per sampled request, written by
//! a thread of its own so that a slow disk never slows a request. Lines that
//! do not fit the queue are dropped and counted.

use std::fs::OpenOptions;
use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, RecvTimeoutError, SyncSender};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{json, Map, Value};
use sluice_control::{AccessLogConfig, AccessLogTarget};
use sluice_filters::RequestRecord;

const QUEUE: usize = 8192;

pub(crate) struct AccessLog {
    ratio: f64,
    tx: Option<SyncSender<String>>,
    dropped: AtomicU64,
    writer: Option<JoinHandle<()>>,
}

impl AccessLog {
    pub(crate) fn start(config: &AccessLogConfig) -> std::io::Result<AccessLog> {
        let mut out: Box<dyn Write + Send> = match &config.target {
            AccessLogTarget::Stdout => Box::new(std::io::stdout()),
            AccessLogTarget::File(path) => {
                Box::new(OpenOptions::new().create(true).append(true).open(path)?)
            }
        };
        let (tx, rx) = sync_channel::<String>(QUEUE);
        let writer = std::thread::Builder::new()
            .name("sluice-access-log".into())
            .spawn(move || {
                let mut out = BufWriter::new(&mut out);
                loop {
                    match rx.recv_timeout(Duration::from_millis(200)) {
                        Ok(line) => {
                            let _ = out.write_all(line.as_bytes());
                            let _ = out.write_all(b"\n");
                        }
                        // Flush when idle so lines show up promptly.
                        Err(RecvTimeoutError::Timeout) => {
                            let _ = out.flush();
                        }
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
                let _ = out.flush();
            })?;
        Ok(AccessLog {
            ratio: config.ratio,
            tx: Some(tx),
            dropped: AtomicU64::new(0),
            writer: Some(writer),
        })
    }

    /// Logs the record if it is sampled (`draw` is uniform in 0..1).
    pub(crate) fn log(&self, record: &RequestRecord<'_>, draw: f64) {
        if draw >= self.ratio {
            return;
        }
        let Some(tx) = &self.tx else { return };
        if tx.try_send(line(record)).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for AccessLog {
    fn drop(&mut self) {
        let dropped = self.dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(
                dropped,
                "access log lines dropped: the writer could not keep up"
            );
        }
        self.tx.take();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The JSON line of a record. Never the prompt or the answer.
pub(crate) fn line(r: &RequestRecord<'_>) -> String {
    let mut v = Map::new();
    v.insert("request_id".into(), r.request_id.into());
    v.insert("route".into(), r.route.into());
    v.insert("cluster".into(), r.cluster.into());
    v.insert("version".into(), r.version.into());
    v.insert("model".into(), r.model.into());
    v.insert("operation".into(), r.operation.as_str().into());
    v.insert("method".into(), r.method.into());
    v.insert("path".into(), r.path.into());
    v.insert("status".into(), r.status.into());
    v.insert("e2e_ms".into(), ms(r.e2e).into());
    if let Some(f) = r.failure {
        v.insert("error".into(), f.reason().into());
    }
    if let Some(fp) = r.prompt_fingerprint {
        v.insert("prompt_fingerprint".into(), fp.into());
    }
    if let Some(run) = r.load_run {
        v.insert("load_run".into(), run.into());
    }
    if let Some(code) = r.grpc_status {
        v.insert("grpc_status".into(), code.into());
    }
    if let Some(ratio) = r.kvcache_ratio {
        v.insert("kvcache_ratio".into(), ratio.into());
    }
    let u = &r.upstream;
    for (name, at) in [
        ("upstream_peer_ms", u.peer),
        ("upstream_connected_ms", u.connected),
        ("upstream_header_ms", u.header),
    ] {
        if let Some(at) = at {
            v.insert(name.into(), ms(at).into());
        }
    }
    if let Some(reused) = u.reused {
        v.insert("upstream_reused".into(), reused.into());
    }
    if let Some(t) = r.tokens {
        let gaps: Vec<Value> = t.gaps.iter().map(|g| json!(ms(*g))).collect();
        v.insert("ttft_ms".into(), t.ttft().map(ms).into());
        v.insert("tpot_ms".into(), r.tpot().map(ms).into());
        v.insert("gaps_ms".into(), gaps.into());
        v.insert("input_tokens".into(), t.summary.input_tokens.into());
        v.insert("output_tokens".into(), t.summary.output_tokens.into());
        v.insert(
            "output_tokens_estimated".into(),
            t.summary.output_tokens_estimated.into(),
        );
        v.insert(
            "finish_reason".into(),
            t.summary.finish_reason.clone().into(),
        );
        v.insert(
            "response_model".into(),
            t.summary.response_model.clone().into(),
        );
        v.insert("clean_end".into(), t.summary.clean_end.into());
    }
    Value::Object(v).to_string()
}
