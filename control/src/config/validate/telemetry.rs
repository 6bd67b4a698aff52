//! Validation of the `telemetry` and `gpu` sections.

use std::path::PathBuf;

use super::super::raw::RawGpuMode;
use super::super::typed::*;
use super::super::RawConfig;
use super::Errors;

pub(super) fn telemetry(raw: &RawConfig, errs: &mut Errors) -> TelemetryConfig {
    let d = TelemetryConfig::default();
    let Some(t) = &raw.telemetry else { return d };
    if let Some(e) = &t.otlp_endpoint {
        if !(e.starts_with("http://") || e.starts_with("https://")) {
            errs.push(
                "telemetry.otlp_endpoint",
                format!("`{e}` must be a URL like http://127.0.0.1:4317"),
            );
        }
    }
    let sample_ratio = match t.sample_ratio {
        Some(r) if !(0.0..=1.0).contains(&r) => {
            errs.push(
                "telemetry.sample_ratio",
                format!("{r} is not within 0.0..=1.0"),
            );
            1.0
        }
        Some(r) => r,
        None => 1.0,
    };
    let access_log = t.access_log.as_ref().map(|a| {
        let percent = a.percent.unwrap_or(100.0);
        if !(0.0..=100.0).contains(&percent) {
            errs.push(
                "telemetry.access_log.percent",
                format!("{percent} is not within 0..=100"),
            );
        }
        if a.path.is_empty() {
            errs.push(
                "telemetry.access_log.path",
                "must be `stdout` or a file path",
            );
        }
        AccessLogConfig {
            target: match a.path.as_str() {
                "stdout" | "-" => AccessLogTarget::Stdout,
                p => AccessLogTarget::File(PathBuf::from(p)),
            },
            ratio: percent.clamp(0.0, 100.0) / 100.0,
        }
    });
    TelemetryConfig {
        otlp_endpoint: t.otlp_endpoint.clone(),
        sample_ratio,
        service_name: t.service_name.clone().unwrap_or(d.service_name),
        model_header: t
            .model_header
            .as_ref()
            .map(|h| errs.header_name("telemetry.model_header".into(), h)),
        access_log,
    }
}

pub(super) fn gpu(raw: &RawConfig, errs: &mut Errors) -> GpuConfig {
    let d = GpuConfig::default();
    let Some(g) = &raw.gpu else { return d };
    GpuConfig {
        mode: match g.enabled {
            Some(RawGpuMode::On) => GpuMode::On,
            Some(RawGpuMode::Off) => GpuMode::Off,
            Some(RawGpuMode::Auto) | None => GpuMode::Auto,
        },
        interval: errs.duration("gpu.interval".into(), g.interval.as_deref(), d.interval),
    }
}
