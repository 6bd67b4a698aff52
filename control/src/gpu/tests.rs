// Tests may spawn bare tasks (each test's runtime ends with it) and read std time.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nvml_wrapper::bitmasks::device::ThrottleReasons;
use serde_json::json;

use super::reading::{throttle_reason_names, DeviceReading, THROTTLE_REASONS};
use super::*;

fn h100(index: u32) -> DeviceReading {
    DeviceReading {
        index,
        name: Some("NVIDIA H100 80GB HBM3".into()),
        uuid: Some(format!("GPU-0000-{index}")),
        memory_used_bytes: Some(40 << 30),
        memory_total_bytes: Some(80 << 30),
        utilization_gpu_percent: Some(87),
        utilization_memory_percent: Some(35),
        temperature_celsius: Some(64),
        power_milliwatts: Some(512_345),
        power_limit_milliwatts: Some(700_000),
        // sw_power_cap + sw_thermal_slowdown, and a bit NVML may add later.
        throttle_bits: Some(0x4 | 0x20 | 0x8000_0000),
    }
}

fn watcher(mode: GpuMode) -> (Arc<GpuWatcher>, Registry) {
    let registry = Registry::new();
    let config = GpuConfig {
        mode,
        interval: Duration::from_millis(50),
    };
    (GpuWatcher::new(config, &registry).unwrap(), registry)
}

fn text(registry: &Registry) -> String {
    let mut out = String::new();
    prometheus::TextEncoder::new()
        .encode_utf8(&registry.gather(), &mut out)
        .unwrap();
    out
}

#[test]
fn throttle_table_matches_nvml_bits() {
    let nvml = [
        ThrottleReasons::GPU_IDLE,
        ThrottleReasons::APPLICATIONS_CLOCKS_SETTING,
        ThrottleReasons::SW_POWER_CAP,
        ThrottleReasons::HW_SLOWDOWN,
        ThrottleReasons::SYNC_BOOST,
        ThrottleReasons::SW_THERMAL_SLOWDOWN,
        ThrottleReasons::HW_THERMAL_SLOWDOWN,
        ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN,
        ThrottleReasons::DISPLAY_CLOCK_SETTING,
    ];
    for ((bit, name), flag) in THROTTLE_REASONS.iter().zip(nvml) {
        assert_eq!(*bit, flag.bits(), "{name}");
    }
}

#[test]
fn throttle_names_skip_unknown_bits() {
    assert_eq!(
        throttle_reason_names(0x4 | 0x20 | 0x8000_0000),
        ["sw_power_cap", "sw_thermal_slowdown"]
    );
    assert!(throttle_reason_names(0).is_empty());
}

#[test]
fn gauge_values_convert_units_and_omit_unsupported_fields() {
    let mut partial = h100(1);
    partial.temperature_celsius = None;
    partial.power_milliwatts = None;
    partial.throttle_bits = None;
    let values = gauge_values(&Reading {
        driver_version: Some("550.54.15".into()),
        devices: vec![h100(0), partial],
    });
    let of = |gpu: &str, family| {
        values
            .devices
            .iter()
            .find(|g| g.gpu == gpu && g.family == family)
            .map(|g| g.value)
    };
    assert_eq!(of("0", Family::UtilizationRatio), Some(0.87));
    assert_eq!(of("0", Family::MemoryUtilizationRatio), Some(0.35));
    assert_eq!(of("0", Family::PowerWatts), Some(512.345));
    assert_eq!(of("0", Family::PowerLimitWatts), Some(700.0));
    assert_eq!(
        of("0", Family::MemoryTotalBytes),
        Some((80u64 << 30) as f64)
    );
    assert_eq!(of("1", Family::TemperatureCelsius), None);
    assert_eq!(of("1", Family::PowerWatts), None);
    assert_eq!(of("1", Family::MemoryUsedBytes), Some((40u64 << 30) as f64));
    // Every reason of GPU 0 is written, 0 or 1; none for GPU 1.
    assert_eq!(values.throttled.len(), THROTTLE_REASONS.len());
    let on: Vec<_> = values
        .throttled
        .iter()
        .filter(|t| t.value == 1.0)
        .map(|t| t.reason)
        .collect();
    assert_eq!(on, ["sw_power_cap", "sw_thermal_slowdown"]);
}

#[test]
fn view_leaves_out_what_was_not_read() {
    let mut partial = h100(0);
    partial.power_milliwatts = None;
    partial.uuid = None;
    let view = GpuView::of(
        &Reading {
            driver_version: Some("550.54.15".into()),
            devices: vec![partial],
        },
        1_700_000_000_000,
    );
    assert_eq!(
        serde_json::to_value(&view).unwrap(),
        json!({
            "available": true,
            "driver_version": "550.54.15",
            "devices": [{
                "index": 0,
                "name": "NVIDIA H100 80GB HBM3",
                "memory_used_bytes": 40u64 << 30,
                "memory_total_bytes": 80u64 << 30,
                "utilization_gpu_percent": 87,
                "utilization_memory_percent": 35,
                "temperature_celsius": 64,
                "power_limit_watts": 700.0,
                "throttle_reasons": ["sw_power_cap", "sw_thermal_slowdown"],
            }],
            "polled_at_ms": 1_700_000_000_000u64,
        })
    );
}

#[test]
fn publish_sets_gauges_and_removes_stale_ones() {
    let (w, registry) = watcher(GpuMode::Auto);
    w.publish(
        &Reading {
            driver_version: None,
            devices: vec![h100(0), h100(1)],
        },
        1,
    );
    let t = text(&registry);
    assert!(t.contains("sluice_gpu_available 1"), "{t}");
    assert!(
        t.contains(r#"sluice_gpu_temperature_celsius{gpu="1",name="NVIDIA H100 80GB HBM3"} 64"#)
    );
    assert!(t.contains(r#"sluice_gpu_throttled{gpu="0",reason="sw_power_cap"} 1"#));
    assert!(t.contains(r#"sluice_gpu_throttled{gpu="0",reason="hw_slowdown"} 0"#));

    // GPU 1 is gone and GPU 0 no longer reports its temperature.
    let mut partial = h100(0);
    partial.temperature_celsius = None;
    w.publish(
        &Reading {
            driver_version: None,
            devices: vec![partial],
        },
        2,
    );
    let t = text(&registry);
    assert!(!t.contains(r#"gpu="1""#), "{t}");
    assert!(!t.contains("sluice_gpu_temperature_celsius{"), "{t}");
    assert!(
        t.contains(r#"sluice_gpu_utilization_ratio{gpu="0",name="NVIDIA H100 80GB HBM3"} 0.87"#)
    );
    assert_eq!(w.snapshot()["devices"].as_array().unwrap().len(), 1);

    w.set_unavailable("GPU poll failed: GPU is lost");
    let t = text(&registry);
    assert!(t.contains("sluice_gpu_available 0"));
    assert!(!t.contains(r#"gpu="0""#), "{t}");
    assert_eq!(w.snapshot()["reason"], "GPU poll failed: GPU is lost");
}

#[tokio::test]
async fn off_mode_never_polls() {
    let (w, registry) = watcher(GpuMode::Off);
    w.clone().run(CancellationToken::new()).await;
    assert_eq!(
        w.snapshot(),
        json!({"available": false, "reason": "disabled", "devices": [], "polled_at_ms": null})
    );
    assert!(text(&registry).contains("sluice_gpu_available 0"));
}

/// On a machine without the NVIDIA driver the watcher reports why and stays
/// at 0; on one with a GPU it reports the devices. Either way it never fails.
#[tokio::test]
async fn auto_mode_reports_what_the_machine_has() {
    let (w, registry) = watcher(GpuMode::Auto);
    let cancel = CancellationToken::new();
    let task = tokio::spawn(w.clone().run(cancel.clone()));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while w.snapshot()["polled_at_ms"].is_null() {
        assert!(tokio::time::Instant::now() < deadline, "no poll in 10 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let view = w.snapshot();
    let available = view["available"].as_bool().unwrap();
    let t = text(&registry);
    assert!(t.contains(&format!("sluice_gpu_available {}", u8::from(available))));
    if available {
        assert!(!view["devices"].as_array().unwrap().is_empty());
    } else {
        assert!(view["reason"].is_string(), "{view}");
        assert!(!t.contains("sluice_gpu_memory_total_bytes{"), "{t}");
    }
    crate::testing::stop(&cancel, task).await;
}

#[test]
fn memory_gate_reads_the_fullest_device() {
    let (w, _registry) = watcher(GpuMode::Auto);
    assert_eq!(w.memory_used_percent_max(), None);
    let mut full = h100(1);
    full.memory_used_bytes = Some(72 << 30);
    let mut unknown = h100(2);
    unknown.memory_total_bytes = None;
    w.publish(
        &Reading {
            driver_version: None,
            devices: vec![h100(0), full, unknown],
        },
        1,
    );
    assert_eq!(w.memory_used_percent_max(), Some(90.0));
    w.set_unavailable("GPU poll failed: GPU is lost");
    assert_eq!(w.memory_used_percent_max(), None);
}
