//! Percentiles over measured durations.

use std::time::Duration;

/// The `q` quantile (0..=1) of `values` by nearest rank; sorts in place.
pub fn percentile(values: &mut [Duration], q: f64) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    values.sort_unstable();
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

/// p50 / p99 of one set of durations, in microseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Summary {
    pub p50_us: f64,
    pub p99_us: f64,
}

impl Summary {
    pub fn of(values: &mut [Duration]) -> Summary {
        Summary {
            p50_us: percentile(values, 0.50).as_secs_f64() * 1e6,
            p99_us: percentile(values, 0.99).as_secs_f64() * 1e6,
        }
    }
}
