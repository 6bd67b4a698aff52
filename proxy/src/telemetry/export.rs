//! The export side of the tracer: the SDK's batch span processor in front of the OTLP
//! gRPC (tonic) exporter, which runs on a current-thread tokio runtime owned by a
//! dedicated thread, and the counters of what was exported or dropped.
//!
//! Why a runtime of its own: the batch processor exports from its own OS thread with a
//! plain `block_on`, while tonic needs a tokio reactor. The exporter below hands each
//! batch to the private runtime and waits on the join handle, so neither pingora's
//! runtimes nor a test's matter, and dropping them never strands an export.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context as _;
use opentelemetry::InstrumentationScope;
use opentelemetry_otlp::{WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SpanData, SpanExporter, SpanProcessor,
};
use opentelemetry_sdk::Resource;
use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// Spans waiting for export; beyond this they are dropped and counted.
const MAX_QUEUE: usize = 4096;
const MAX_BATCH: usize = 512;
/// How long finished spans may wait before a (partial) batch is sent.
const SCHEDULE_DELAY: Duration = Duration::from_millis(500);
/// Upper bound of one export, retries included.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long dropping the tracer waits for the last spans to be sent.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);

/// The enabled tracer's shared state. Dropping it flushes what is queued (bounded by
/// [`SHUTDOWN_TIMEOUT`]) and stops the export thread.
pub(super) struct Pipeline {
    processor: BatchSpanProcessor,
    counters: Arc<Counters>,
    scope: InstrumentationScope,
    sample_ratio: f64,
    runtime: ExportRuntime,
}

#[derive(Debug, Default)]
struct Counters {
    /// Spans handed to the processor and not yet taken by an export: an upper bound of
    /// the processor's queue, so that queue never overflows unseen.
    queued: AtomicUsize,
    dropped: AtomicU64,
    exported: AtomicU64,
    /// Whether the last export failed, to log the change only.
    failing: AtomicBool,
}

impl Pipeline {
    pub(super) fn start(
        endpoint: &str,
        service_name: &str,
        sample_ratio: f64,
    ) -> anyhow::Result<Pipeline> {
        let runtime = ExportRuntime::start()?;
        let mut otlp = {
            // tonic's lazy channel spawns its worker on the current runtime.
            let _entered = runtime.handle.enter();
            opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(endpoint)
                .with_timeout(EXPORT_TIMEOUT)
                .with_retry_policy(opentelemetry_otlp::RetryPolicy::recommended())
                .build()
                .with_context(|| format!("telemetry.otlp_endpoint: cannot export to {endpoint}"))?
        };
        otlp.set_resource(
            &Resource::builder()
                .with_service_name(service_name.to_owned())
                .build(),
        );
        let counters = Arc::new(Counters::default());
        let exporter = CountingExporter {
            otlp: Arc::new(otlp),
            runtime: runtime.handle.clone(),
            counters: counters.clone(),
        };
        let config = BatchConfigBuilder::default()
            .with_max_queue_size(MAX_QUEUE)
            .with_max_export_batch_size(MAX_BATCH)
            .with_scheduled_delay(SCHEDULE_DELAY)
            .build();
        let processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(config)
            .build();
        tracing::info!(endpoint, service_name, sample_ratio, "otlp trace export on");
        Ok(Pipeline {
            processor,
            counters,
            scope: InstrumentationScope::builder("sluice")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
            sample_ratio,
            runtime,
        })
    }

    pub(super) fn sample_ratio(&self) -> f64 {
        self.sample_ratio
    }

    pub(super) fn scope(&self) -> &InstrumentationScope {
        &self.scope
    }

    /// Queues a finished span without blocking; a full queue drops it and counts it.
    pub(super) fn submit(&self, span: SpanData) {
        if self.counters.queued.fetch_add(1, Ordering::AcqRel) >= MAX_QUEUE {
            self.counters.queued.fetch_sub(1, Ordering::AcqRel);
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.processor.on_end(span);
    }

    pub(super) fn dropped(&self) -> u64 {
        self.counters.dropped.load(Ordering::Relaxed)
    }

    pub(super) fn exported(&self) -> u64 {
        self.counters.exported.load(Ordering::Relaxed)
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        // Sends what is queued; a collector that is down makes this time out, and
        // stopping the runtime then cancels the export still waiting.
        let _ = self.processor.shutdown_with_timeout(SHUTDOWN_TIMEOUT);
        self.runtime.stop();
    }
}

/// The OTLP exporter run on the export runtime, counting what it sends and drops.
struct CountingExporter {
    otlp: Arc<opentelemetry_otlp::SpanExporter>,
    runtime: Handle,
    counters: Arc<Counters>,
}

impl fmt::Debug for CountingExporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountingExporter")
            .field("counters", &self.counters)
            .finish()
    }
}

impl SpanExporter for CountingExporter {
    fn export(
        &self,
        batch: Vec<SpanData>,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        let spans = batch.len();
        self.counters.queued.fetch_sub(spans, Ordering::AcqRel);
        let otlp = self.otlp.clone();
        let counters = self.counters.clone();
        // Spawned now (not when the future is first polled): the processor thread only
        // waits on the join handle. A stopped runtime answers with a cancelled handle.
        let task = self.runtime.spawn(async move {
            match tokio::time::timeout(EXPORT_TIMEOUT, otlp.export(batch)).await {
                Ok(result) => result,
                Err(_) => Err(OTelSdkError::Timeout(EXPORT_TIMEOUT)),
            }
        });
        async move {
            let result = match task.await {
                Ok(result) => result,
                Err(_) => Err(OTelSdkError::InternalFailure(
                    "otlp export runtime stopped".into(),
                )),
            };
            let spans = spans as u64;
            match &result {
                Ok(()) => {
                    counters.exported.fetch_add(spans, Ordering::Relaxed);
                    if counters.failing.swap(false, Ordering::Relaxed) {
                        tracing::info!("otlp trace export recovered");
                    }
                }
                Err(err) => {
                    counters.dropped.fetch_add(spans, Ordering::Relaxed);
                    if !counters.failing.swap(true, Ordering::Relaxed) {
                        tracing::warn!(error = %err, spans, "otlp trace export failed, spans dropped");
                    }
                }
            }
            result
        }
    }
}

/// A current-thread tokio runtime on a thread of its own, running until stopped.
struct ExportRuntime {
    handle: Handle,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ExportRuntime {
    fn start() -> anyhow::Result<ExportRuntime> {
        let (handle_tx, handle_rx) = std::sync::mpsc::sync_channel(1);
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("sluice-otlp".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(err) => {
                        let _ = handle_tx.send(Err(err));
                        return;
                    }
                };
                let _ = handle_tx.send(Ok(runtime.handle().clone()));
                // Runs the spawned exports until the stop signal (or its sender's drop).
                runtime.block_on(async move {
                    let _ = stopped.await;
                });
                runtime.shutdown_timeout(Duration::from_millis(200));
            })
            .context("start the otlp export thread")?;
        let handle = handle_rx
            .recv()
            .context("the otlp export thread exited at start")?
            .context("build the otlp export runtime")?;
        Ok(ExportRuntime {
            handle,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ExportRuntime {
    fn drop(&mut self) {
        self.stop();
    }
}
