//! The thin NVML layer: open the library, read every device into a
//! [`Reading`]. Every call here blocks (briefly), so callers run it on a
//! blocking thread. A field the device does not support is left `None`;
//! only a failure to list the devices fails the poll.

use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use tracing::debug;

use super::reading::{DeviceReading, Reading};

/// Loads `libnvidia-ml` and initialises it. Fails on a machine without the
/// NVIDIA driver (library not found, or driver not loaded).
pub(super) fn open() -> Result<Nvml, NvmlError> {
    Nvml::init()
}

/// Whether `error` means there is no usable driver at all, rather than a
/// passing failure.
pub(super) fn is_missing_driver(error: &NvmlError) -> bool {
    matches!(
        error,
        NvmlError::LibloadingError(_)
            | NvmlError::FailedToLoadSymbol(_)
            | NvmlError::LibraryNotFound
            | NvmlError::DriverNotLoaded
    )
}

/// One poll of every device.
pub(super) fn read(nvml: &Nvml) -> Result<Reading, NvmlError> {
    let count = nvml.device_count()?;
    let mut devices = Vec::with_capacity(count as usize);
    for index in 0..count {
        match nvml.device_by_index(index) {
            Ok(device) => devices.push(read_device(index, &device)),
            // One lost GPU must not hide the others.
            Err(e) => debug!(gpu = index, error = %e, "GPU cannot be opened"),
        }
    }
    Ok(Reading {
        driver_version: field(None, "driver_version", nvml.sys_driver_version()),
        devices,
    })
}

fn read_device(index: u32, device: &Device<'_>) -> DeviceReading {
    let at = Some(index);
    let memory = field(at, "memory", device.memory_info());
    let utilization = field(at, "utilization", device.utilization_rates());
    DeviceReading {
        index,
        name: field(at, "name", device.name()),
        uuid: field(at, "uuid", device.uuid()),
        memory_used_bytes: memory.as_ref().map(|m| m.used),
        memory_total_bytes: memory.as_ref().map(|m| m.total),
        utilization_gpu_percent: utilization.as_ref().map(|u| u.gpu),
        utilization_memory_percent: utilization.as_ref().map(|u| u.memory),
        temperature_celsius: field(
            at,
            "temperature",
            device.temperature(TemperatureSensor::Gpu),
        ),
        power_milliwatts: field(at, "power", device.power_usage()),
        power_limit_milliwatts: field(at, "power_limit", device.enforced_power_limit()),
        throttle_bits: field(
            at,
            "throttle_reasons",
            device.current_throttle_reasons().map(|r| r.bits()),
        ),
    }
}

/// The value, or `None` when the field cannot be read. Unsupported fields
/// are normal (consumer cards, MIG, vGPU) and stay quiet; other errors are
/// logged at debug, since they repeat every poll.
fn field<T>(gpu: Option<u32>, field: &'static str, result: Result<T, NvmlError>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(NvmlError::NotSupported) => None,
        Err(e) => {
            debug!(gpu, field, error = %e, "GPU field cannot be read");
            None
        }
    }
}
