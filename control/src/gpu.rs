//! The GPU watcher: polls NVML every `gpu.interval` into the `sluice_gpu_*`
//! gauges and the view `GET /v1/gpu` returns. Off the request path entirely.
//!
//! NVML calls block, though briefly (a few milliseconds a poll), so each
//! poll runs in `spawn_blocking` with the `Nvml` handle (which is `Send +
//! Sync`) shared through an `Arc`. That keeps the loop on tokio's clock and
//! cancellation like every other control task, with no thread of our own to
//! stop; the blocking pool keeps one thread warm between polls.
//!
//! Without a driver (no `libnvidia-ml`, or the kernel module not loaded)
//! the watcher says so once (info in `auto` mode, warn in `on` mode), sets
//! `sluice_gpu_available 0` and tries again every minute, quietly: a
//! driver that appears later is picked up without a restart, and a failed
//! `dlopen` a minute costs nothing.

mod nvml;
mod reading;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use prometheus::{GaugeVec, IntGauge, Registry};
use serde_json::Value;
use sluice_filters::{register_family, register_gauge};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::config::{GpuConfig, GpuMode};
use reading::{gauge_values, Family, GaugeValues, GpuView, Reading};

/// How long to wait before trying to open NVML again.
const RETRY_OPEN: Duration = Duration::from_secs(60);
const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// GPU memory allocated and installed, bytes, per device: what the
/// `gpu_memory_max` gate's PromQL reads.
pub(crate) const MEMORY_USED_METRIC: &str = "sluice_gpu_memory_used_bytes";
pub(crate) const MEMORY_TOTAL_METRIC: &str = "sluice_gpu_memory_total_bytes";

pub struct GpuWatcher {
    config: GpuConfig,
    gauges: Gauges,
    view: ArcSwap<GpuView>,
    /// The label sets the last poll wrote, so that the next one can remove
    /// those it does not write. Only the watcher's own task takes it.
    written: Mutex<GaugeValues>,
}

struct Gauges {
    available: IntGauge,
    memory_used: GaugeVec,
    memory_total: GaugeVec,
    utilization: GaugeVec,
    memory_utilization: GaugeVec,
    temperature: GaugeVec,
    power: GaugeVec,
    power_limit: GaugeVec,
    throttled: GaugeVec,
}

impl Gauges {
    fn new(registry: &Registry) -> Result<Gauges, prometheus::Error> {
        let device =
            |name: &str, help: &str| register_family(registry, name, help, &["gpu", "name"]);
        Ok(Gauges {
            available: register_gauge(
                registry,
                "sluice_gpu_available",
                "1 while NVML answers and sees at least one GPU, else 0.",
            )?,
            memory_used: device(MEMORY_USED_METRIC, "GPU memory allocated.")?,
            memory_total: device(MEMORY_TOTAL_METRIC, "GPU memory installed.")?,
            utilization: device(
                "sluice_gpu_utilization_ratio",
                "Share of the last sample period in which a kernel ran (0..1).",
            )?,
            memory_utilization: device(
                "sluice_gpu_memory_utilization_ratio",
                "Share of the last sample period in which device memory was read or written (0..1).",
            )?,
            temperature: device("sluice_gpu_temperature_celsius", "GPU die temperature.")?,
            power: device("sluice_gpu_power_watts", "Power drawn by the GPU board.")?,
            power_limit: device(
                "sluice_gpu_power_limit_watts",
                "Power limit the driver enforces on the GPU board.",
            )?,
            throttled: register_family(
                registry,
                "sluice_gpu_throttled",
                "1 while the GPU's clocks are held down for this reason, else 0.",
                &["gpu", "reason"],
            )?,
        })
    }

    fn family(&self, family: Family) -> &GaugeVec {
        match family {
            Family::MemoryUsedBytes => &self.memory_used,
            Family::MemoryTotalBytes => &self.memory_total,
            Family::UtilizationRatio => &self.utilization,
            Family::MemoryUtilizationRatio => &self.memory_utilization,
            Family::TemperatureCelsius => &self.temperature,
            Family::PowerWatts => &self.power,
            Family::PowerLimitWatts => &self.power_limit,
        }
    }
}

impl GpuWatcher {
    /// Registers the `sluice_gpu_*` families in `registry`. Nothing is
    /// polled until [`GpuWatcher::run`].
    pub fn new(
        config: GpuConfig,
        registry: &Registry,
    ) -> Result<Arc<GpuWatcher>, prometheus::Error> {
        let reason = match config.mode {
            GpuMode::Off => "disabled",
            GpuMode::Auto | GpuMode::On => "not polled yet",
        };
        Ok(Arc::new(GpuWatcher {
            config,
            gauges: Gauges::new(registry)?,
            view: ArcSwap::from_pointee(GpuView::unavailable(reason, None)),
            written: Mutex::new(GaugeValues::default()),
        }))
    }

    /// The body of `GET /v1/gpu`.
    pub fn snapshot(&self) -> Value {
        serde_json::to_value(&**self.view.load()).unwrap_or_else(
            |e| serde_json::json!({"available": false, "reason": e.to_string(), "devices": []}),
        )
    }

    /// Percent of memory used on the fullest GPU as last polled (the
    /// `gpu_memory_max` rollout gate); `None` while no GPU is readable.
    pub fn memory_used_percent_max(&self) -> Option<f64> {
        let view = self.view.load();
        if !view.available {
            return None;
        }
        view.devices
            .iter()
            .filter_map(|d| {
                let (used, total) = (d.memory_used_bytes?, d.memory_total_bytes?);
                (total > 0).then(|| used as f64 * 100.0 / total as f64)
            })
            .reduce(f64::max)
    }

    /// Polls until `cancel`. Returns at once in `off` mode.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        if self.config.mode == GpuMode::Off {
            return;
        }
        let mut told = false;
        loop {
            let nvml = match blocking(&cancel, nvml::open).await {
                None => return,
                Some(Ok(Ok(nvml))) => Arc::new(nvml),
                Some(Ok(Err(e))) => {
                    let reason = if nvml::is_missing_driver(&e) {
                        format!("NVIDIA driver not found: {e}")
                    } else {
                        format!("NVML cannot start: {e}")
                    };
                    self.tell_unavailable(&reason, &mut told);
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        () = tokio::time::sleep(RETRY_OPEN) => continue,
                    }
                }
                Some(Err(e)) => {
                    self.tell_unavailable(&format!("NVML cannot start: {e}"), &mut told);
                    return;
                }
            };
            info!(
                interval_ms = self.config.interval.as_millis() as u64,
                "GPU watcher started"
            );
            self.poll(nvml, &cancel).await;
            return;
        }
    }

    /// The first time only, at info (`auto`) or warn (`on`); then at debug.
    fn tell_unavailable(&self, reason: &str, told: &mut bool) {
        self.set_unavailable(reason);
        match (*told, self.config.mode) {
            (false, GpuMode::On) => warn!(reason, "GPU watching is on but NVML is unavailable"),
            (false, _) => info!(
                reason,
                "no NVIDIA GPU to watch; sluice_gpu_available stays 0"
            ),
            (true, _) => debug!(reason, "NVML still unavailable"),
        }
        *told = true;
    }

    async fn poll(&self, nvml: Arc<nvml_wrapper::Nvml>, cancel: &CancellationToken) {
        // Validation refuses 0; a zero interval would make tokio panic.
        let mut ticks = tokio::time::interval(self.config.interval.max(MIN_INTERVAL));
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = ticks.tick() => {}
            }
            let handle = nvml.clone();
            let result = match blocking(cancel, move || nvml::read(&handle)).await {
                None => return,
                Some(Ok(result)) => result.map_err(|e| e.to_string()),
                Some(Err(e)) => Err(e.to_string()),
            };
            match result {
                Ok(reading) => {
                    if failing {
                        info!("GPU poll recovered");
                    }
                    failing = false;
                    self.publish(&reading, now_ms());
                }
                Err(e) => {
                    if !failing {
                        warn!(error = %e, "GPU poll failed");
                    }
                    failing = true;
                    self.set_unavailable(&format!("GPU poll failed: {e}"));
                }
            }
        }
    }

    /// Sets every gauge and the view from one reading.
    fn publish(&self, reading: &Reading, polled_at_ms: u64) {
        if reading.devices.is_empty() {
            self.set_unavailable("NVML sees no GPU");
            return;
        }
        self.write_gauges(gauge_values(reading));
        self.gauges.available.set(1);
        self.view
            .store(Arc::new(GpuView::of(reading, polled_at_ms)));
    }

    fn set_unavailable(&self, reason: &str) {
        self.write_gauges(GaugeValues::default());
        self.gauges.available.set(0);
        self.view
            .store(Arc::new(GpuView::unavailable(reason, Some(now_ms()))));
    }

    /// Writes `values`, then removes what the previous write set and this
    /// one does not.
    fn write_gauges(&self, values: GaugeValues) {
        let mut written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        for g in &values.devices {
            self.gauges
                .family(g.family)
                .with_label_values(&[&g.gpu, &g.name])
                .set(g.value);
        }
        for t in &values.throttled {
            self.gauges
                .throttled
                .with_label_values(&[t.gpu.as_str(), t.reason])
                .set(t.value);
        }
        for old in &written.devices {
            let kept = values
                .devices
                .iter()
                .any(|g| g.family == old.family && g.gpu == old.gpu && g.name == old.name);
            if !kept {
                let _ = self
                    .gauges
                    .family(old.family)
                    .remove_label_values(&[&old.gpu, &old.name]);
            }
        }
        for old in &written.throttled {
            let kept = values
                .throttled
                .iter()
                .any(|t| t.gpu == old.gpu && t.reason == old.reason);
            if !kept {
                let _ = self
                    .gauges
                    .throttled
                    .remove_label_values(&[old.gpu.as_str(), old.reason]);
            }
        }
        *written = values;
    }
}

/// Runs `f` on the blocking pool; `None` when cancelled first.
async fn blocking<T: Send + 'static>(
    cancel: &CancellationToken,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<Result<T, tokio::task::JoinError>> {
    let task = tokio::task::spawn_blocking(f);
    tokio::select! {
        () = cancel.cancelled() => None,
        joined = task => Some(joined),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests;
