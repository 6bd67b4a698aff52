//! What one poll of the GPUs read, and the pure steps from it to gauge
//! values, throttle-reason names and the `GET /v1/gpu` view. Nothing here
//! touches NVML, so it is tested with made-up readings.

use serde::{Serialize, Serializer};
use serde_with::skip_serializing_none;

/// One poll. A field that the device or driver does not support is `None`
/// and is left out of the gauges and of the view.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Reading {
    pub driver_version: Option<String>,
    pub devices: Vec<DeviceReading>,
}

/// One device as read; serialized, it is a device of the `GET /v1/gpu`
/// view, with power in watts and the throttle reasons by name.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub(super) struct DeviceReading {
    pub index: u32,
    pub name: Option<String>,
    pub uuid: Option<String>,
    pub memory_used_bytes: Option<u64>,
    pub memory_total_bytes: Option<u64>,
    /// Percent of the last sample period a kernel ran.
    pub utilization_gpu_percent: Option<u32>,
    /// Percent of the last sample period device memory was read or written.
    pub utilization_memory_percent: Option<u32>,
    pub temperature_celsius: Option<u32>,
    #[serde(rename = "power_watts", serialize_with = "as_watts")]
    pub power_milliwatts: Option<u32>,
    #[serde(rename = "power_limit_watts", serialize_with = "as_watts")]
    pub power_limit_milliwatts: Option<u32>,
    /// NVML's clocks-event (throttle) reason bit mask.
    #[serde(rename = "throttle_reasons", serialize_with = "as_reason_names")]
    pub throttle_bits: Option<u64>,
}

fn as_watts<S: Serializer>(milli: &Option<u32>, s: S) -> Result<S::Ok, S::Error> {
    milli.map(milli_to_unit).serialize(s)
}

fn as_reason_names<S: Serializer>(bits: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    bits.map(throttle_reason_names).serialize(s)
}

/// NVML's throttle reasons, as `nvmlClocksThrottleReason*` bits, with the
/// name each has in the `reason` label and in the API. The bits are NVML's
/// ABI (nvml.h), stable across driver versions.
pub(super) const THROTTLE_REASONS: [(u64, &str); 9] = [
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
];

/// The names of the reasons set in `bits`, in table order; unknown bits are
/// ignored.
pub(super) fn throttle_reason_names(bits: u64) -> Vec<&'static str> {
    THROTTLE_REASONS
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| *name)
        .collect()
}

/// The per-device gauge families, named by their metric suffix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Family {
    MemoryUsedBytes,
    MemoryTotalBytes,
    UtilizationRatio,
    MemoryUtilizationRatio,
    TemperatureCelsius,
    PowerWatts,
    PowerLimitWatts,
}

/// One gauge value of one device: family, `gpu` label, `name` label, value.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct DeviceGauge {
    pub family: Family,
    pub gpu: String,
    pub name: String,
    pub value: f64,
}

/// One `sluice_gpu_throttled{gpu, reason}` value, 0 or 1.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ThrottleGauge {
    pub gpu: String,
    pub reason: &'static str,
    pub value: f64,
}

/// Every gauge value one reading sets. What is not here is removed from the
/// registry, so that a device or field that went away leaves no stale value.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct GaugeValues {
    pub devices: Vec<DeviceGauge>,
    pub throttled: Vec<ThrottleGauge>,
}

pub(super) fn gauge_values(reading: &Reading) -> GaugeValues {
    let mut out = GaugeValues::default();
    for d in &reading.devices {
        let gpu = d.index.to_string();
        let name = d.name.clone().unwrap_or_default();
        let mut push = |family, value: Option<f64>| {
            if let Some(value) = value {
                out.devices.push(DeviceGauge {
                    family,
                    gpu: gpu.clone(),
                    name: name.clone(),
                    value,
                });
            }
        };
        push(
            Family::MemoryUsedBytes,
            d.memory_used_bytes.map(|b| b as f64),
        );
        push(
            Family::MemoryTotalBytes,
            d.memory_total_bytes.map(|b| b as f64),
        );
        push(
            Family::UtilizationRatio,
            d.utilization_gpu_percent.map(percent_to_ratio),
        );
        push(
            Family::MemoryUtilizationRatio,
            d.utilization_memory_percent.map(percent_to_ratio),
        );
        push(
            Family::TemperatureCelsius,
            d.temperature_celsius.map(f64::from),
        );
        push(Family::PowerWatts, d.power_milliwatts.map(milli_to_unit));
        push(
            Family::PowerLimitWatts,
            d.power_limit_milliwatts.map(milli_to_unit),
        );
        if let Some(bits) = d.throttle_bits {
            for (bit, reason) in THROTTLE_REASONS {
                out.throttled.push(ThrottleGauge {
                    gpu: gpu.clone(),
                    reason,
                    value: if bits & bit != 0 { 1.0 } else { 0.0 },
                });
            }
        }
    }
    out
}

fn percent_to_ratio(percent: u32) -> f64 {
    f64::from(percent.min(100)) / 100.0
}

fn milli_to_unit(milli: u32) -> f64 {
    f64::from(milli) / 1000.0
}

/// The body of `GET /v1/gpu`.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub(super) struct GpuView {
    pub available: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
    pub devices: Vec<DeviceReading>,
    /// Milliseconds since the Unix epoch of the last poll; `null` before one.
    pub polled_at_ms: Option<u64>,
}

impl GpuView {
    /// Not watching: why, and no devices.
    pub(super) fn unavailable(reason: impl Into<String>, polled_at_ms: Option<u64>) -> GpuView {
        GpuView {
            available: false,
            reason: Some(reason.into()),
            driver_version: None,
            devices: Vec::new(),
            polled_at_ms,
        }
    }

    pub(super) fn of(reading: &Reading, polled_at_ms: u64) -> GpuView {
        GpuView {
            available: true,
            reason: None,
            driver_version: reading.driver_version.clone(),
            devices: reading.devices.clone(),
            polled_at_ms: Some(polled_at_ms),
        }
    }
}
