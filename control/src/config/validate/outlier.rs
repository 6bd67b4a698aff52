//! `clusters[].outlier_detection`: Envoy's defaults for what is not set,
//! positive counts and durations, a share within 0..=100, and none on a
//! cache cluster (its answers have no HTTP status to read).

use std::time::Duration;

use sluice_filters::{OutlierPolicy, DEFAULT_OUTLIER_POLICY};

use super::super::raw::{RawCluster, RawClusterKind, RawOutlierDetection};
use super::errors::Errors;

pub(super) fn policy(
    at: &str,
    cluster: &RawCluster,
    raw: &RawOutlierDetection,
    errs: &mut Errors,
) -> Option<OutlierPolicy> {
    let at = format!("{at}.outlier_detection");
    if cluster.kind == RawClusterKind::Cache {
        errs.push(
            at,
            "not allowed on a cache cluster (its answers have no HTTP status)",
        );
        return None;
    }
    let d = DEFAULT_OUTLIER_POLICY;
    let ms = |errs: &mut Errors, key: &str, text: Option<&str>, default: u64| {
        let default = Duration::from_millis(default);
        errs.duration(format!("{at}.{key}"), text, default)
            .as_millis() as u64
    };
    let consecutive_5xx = match raw.consecutive_5xx {
        Some(0) => {
            errs.push(format!("{at}.consecutive_5xx"), "must be at least 1");
            d.consecutive_5xx
        }
        Some(n) => n,
        None => d.consecutive_5xx,
    };
    Some(OutlierPolicy {
        consecutive_5xx,
        interval_ms: ms(errs, "interval", raw.interval.as_deref(), d.interval_ms),
        base_ejection_ms: ms(
            errs,
            "base_ejection",
            raw.base_ejection.as_deref(),
            d.base_ejection_ms,
        ),
        max_ejection_time_ms: ms(
            errs,
            "max_ejection_time",
            raw.max_ejection_time.as_deref(),
            d.max_ejection_time_ms,
        ),
        max_ejection_percent: errs
            .percent(format!("{at}.max_ejection"), raw.max_ejection.as_ref())
            .unwrap_or(d.max_ejection_percent),
    })
}
