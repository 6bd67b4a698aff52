//! A real OTLP collector for the tests: the `rotel` agent (pip `rotel`, from the venv)
//! receiving OTLP/gRPC on a free loopback port, exporting nowhere (`blackhole`) and
//! printing every span it receives (`--debug-log traces`, detailed), which is read back.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::support::{self, free_port, Process, TempDir, WAIT_POLL};

/// The `rotel-agent` binary that the pip package ships, if it is installed.
pub(crate) fn rotel_agent() -> Option<PathBuf> {
    let python = support::python()?;
    let out = Command::new(python)
        .args([
            "-c",
            "import os, rotel; print(os.path.join(os.path.dirname(rotel.__file__), 'rotel-agent'))",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (out.status.success() && path.is_file()).then_some(path)
}

/// A running rotel agent; killed when dropped.
pub(crate) struct Collector {
    _child: Process,
    grpc: SocketAddr,
    output: Arc<Mutex<String>>,
    _dir: TempDir,
}

impl Collector {
    /// Starts rotel and waits until its gRPC port accepts. A port taken between
    /// [`free_port`] and rotel binding it is retried on new ports.
    pub(crate) async fn start(agent: &PathBuf) -> anyhow::Result<Collector> {
        let mut last = None;
        for _ in 0..3 {
            match Self::try_start(agent).await {
                Ok(collector) => return Ok(collector),
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("rotel did not start")))
    }

    async fn try_start(agent: &PathBuf) -> anyhow::Result<Collector> {
        let dir = TempDir::new("rotel");
        let grpc = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let http = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let child = Command::new(agent)
            .arg("start")
            .args(["--otlp-grpc-endpoint", &grpc.to_string()])
            .args(["--otlp-http-endpoint", &http.to_string()])
            .args(["--exporter", "blackhole"])
            .args(["--debug-log", "traces", "--debug-log-verbosity", "detailed"])
            .args(["--batch-timeout", "50ms"])
            .arg("--pid-file")
            .arg(dir.path().join("rotel.pid"))
            .arg("--log-file")
            .arg(dir.path().join("rotel.log"))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("spawn rotel-agent")?;
        let mut child = Process::new(child);
        let output = Arc::new(Mutex::new(String::new()));
        for pipe in [
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let output = output.clone();
            // Ends at EOF, when the child is killed.
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let mut out = output.lock().unwrap();
                    out.push_str(&strip_ansi(&line));
                    out.push('\n');
                }
            });
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = child.try_wait()? {
                bail!(
                    "rotel exited at start: {status}\n{}",
                    output.lock().unwrap()
                );
            }
            if tokio::net::TcpStream::connect(grpc).await.is_ok() {
                break;
            }
            if Instant::now() >= deadline {
                bail!("rotel did not accept on {grpc} within 15s");
            }
            tokio::time::sleep(WAIT_POLL).await;
        }
        Ok(Collector {
            _child: child,
            grpc,
            output,
            _dir: dir,
        })
    }

    /// `http://127.0.0.1:PORT`, for `telemetry.otlp_endpoint`.
    pub(crate) fn endpoint(&self) -> String {
        format!("http://{}", self.grpc)
    }

    /// Everything rotel printed so far.
    pub(super) fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// The spans received so far (parsed from rotel's detailed debug log).
    pub(super) fn spans(&self) -> Vec<ReceivedSpan> {
        parse_spans(&self.output())
    }

    /// Waits until `count` spans of the trace `trace_id` (32 hex) have arrived.
    pub(super) async fn wait_for_trace(
        &self,
        trace_id: &str,
        count: usize,
        timeout: Duration,
    ) -> Vec<ReceivedSpan> {
        let deadline = Instant::now() + timeout;
        loop {
            let spans: Vec<_> = self
                .spans()
                .into_iter()
                .filter(|s| s.trace_id == trace_id)
                .collect();
            if spans.len() >= count {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "collector got {} of {count} spans of trace {trace_id} within {timeout:?}:\n{}",
                spans.len(),
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The two spans of one proxied request in trace `trace_id`, (server, client), once
    /// both arrived (30 s at most).
    pub(super) async fn request_spans(&self, trace_id: &str) -> (ReceivedSpan, ReceivedSpan) {
        let spans = self
            .wait_for_trace(trace_id, 2, Duration::from_secs(30))
            .await;
        let kind = |kind: &str| {
            let span = spans.iter().find(|s| s.kind == kind);
            span.unwrap_or_else(|| panic!("no {kind} span in {spans:?}"))
                .clone()
        };
        (kind("SPAN_KIND_SERVER"), kind("SPAN_KIND_CLIENT"))
    }
}

/// One span as the collector printed it. Attribute values keep rotel's rendering:
/// `Str(x)`, `Int(7)`, `Double(0.5)`, `Slice(Str(stop))`.
#[derive(Clone, Debug, Default)]
pub(super) struct ReceivedSpan {
    /// `service.name` of the resource the span came with.
    pub service: String,
    pub trace_id: String,
    pub parent_id: String,
    pub id: String,
    pub name: String,
    pub kind: String,
    pub trace_state: String,
    pub attributes: BTreeMap<String, String>,
}

impl ReceivedSpan {
    pub(super) fn attr(&self, key: &str) -> &str {
        self.attributes.get(key).map_or("", String::as_str)
    }
}

/// Reads rotel's `--debug-log-verbosity detailed` text: `ResourceSpans #n` blocks with
/// resource attributes, then `Span #n` blocks of `Field : value` lines and attributes.
fn parse_spans(output: &str) -> Vec<ReceivedSpan> {
    let mut spans = Vec::new();
    let mut service = String::new();
    let mut current: Option<ReceivedSpan> = None;
    let mut in_resource = false;
    for line in output.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("ResourceSpans #") {
            spans.extend(current.take());
            in_resource = true;
            service.clear();
        } else if trimmed.starts_with("Span #") {
            spans.extend(current.take());
            in_resource = false;
            current = Some(ReceivedSpan {
                service: service.clone(),
                ..ReceivedSpan::default()
            });
        } else if trimmed.starts_with("ScopeSpans #") {
            spans.extend(current.take());
            in_resource = false;
        } else if let Some(attr) = trimmed.strip_prefix("-> ") {
            let Some((key, value)) = attr.split_once(": ") else {
                continue;
            };
            if in_resource && key == "service.name" {
                service = unwrap_value(value).to_owned();
            } else if let Some(span) = current.as_mut() {
                span.attributes.insert(key.to_owned(), value.to_owned());
            }
        } else if let (Some(span), Some((field, value))) =
            (current.as_mut(), trimmed.split_once(':'))
        {
            let value = value.trim().to_owned();
            match field.trim() {
                "Trace ID" => span.trace_id = value,
                "Parent ID" => span.parent_id = value,
                "ID" => span.id = value,
                "Name" => span.name = value,
                "Kind" => span.kind = value,
                "TraceState" => span.trace_state = value,
                _ => {}
            }
        }
    }
    spans.extend(current);
    spans
}

/// `Str(x)` → `x`.
fn unwrap_value(value: &str) -> &str {
    value
        .split_once('(')
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .unwrap_or(value)
}

/// Removes terminal colour sequences (`ESC [ ... m`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
