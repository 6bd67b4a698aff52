//! `routes[].shedding`: the priority's descriptor and levels, at least one
//! bound, each bound positive, and the timings.

use std::collections::HashMap;
use std::time::Duration;

use sluice_filters::{format_duration, parse_duration, Descriptor, Signals};

use super::super::raw::{RawShedBounds, RawShedding};
use super::super::typed::*;
use super::errors::Errors;
use crate::stats::MAX_WINDOW_SECONDS;

/// `scraped`: a cluster of the route's split has `metrics_path`, so that
/// the queue gauge can be read.
pub(super) fn shedding(
    at: &str,
    raw: &RawShedding,
    scraped: bool,
    errs: &mut Errors,
) -> SheddingConfig {
    let p = &raw.priority;
    let descriptor = match p.descriptor.as_deref() {
        None => Descriptor::Header(DEFAULT_PRIORITY_HEADER.to_owned()),
        Some(form) => match Descriptor::parse(form) {
            Some(d @ (Descriptor::Header(_) | Descriptor::Model)) => d,
            _ => {
                errs.push(
                    format!("{at}.priority.descriptor"),
                    format!("unknown descriptor `{form}` (model or header:NAME)"),
                );
                Descriptor::Header(DEFAULT_PRIORITY_HEADER.to_owned())
            }
        },
    };
    if p.levels.len() < 2 {
        errs.push(
            format!("{at}.priority.levels"),
            format!(
                "at least two priorities are needed, highest first (the first is never shed), \
                 found {}",
                p.levels.len()
            ),
        );
    }
    let mut seen = HashMap::new();
    for (i, level) in p.levels.iter().enumerate() {
        let path = format!("{at}.priority.levels[{i}]");
        if level.trim().is_empty() {
            errs.push(path, "must not be empty");
        } else {
            errs.unique(&mut seen, path, "priority", level);
        }
    }
    let last = p.levels.len().saturating_sub(1);
    let default = match &p.default {
        None => last,
        Some(name) => p.levels.iter().position(|l| l == name).unwrap_or_else(|| {
            errs.push(
                format!("{at}.priority.default"),
                format!(
                    "`{name}` is not one of the levels ({})",
                    p.levels.join(", ")
                ),
            );
            last
        }),
    };
    let bounds = bounds(at, &raw.bounds, errs);
    if bounds.queue.is_some() && !scraped {
        errs.push(
            format!("{at}.bounds.queue"),
            "no cluster of the route's split has `metrics_path`: its queue gauge is not scraped",
        );
    }
    let window_path = format!("{at}.window");
    let window = errs.duration(
        window_path.clone(),
        raw.window.as_deref(),
        DEFAULT_SHED_WINDOW,
    );
    let window = if window > Duration::from_secs(MAX_WINDOW_SECONDS) {
        errs.push(
            window_path,
            format!(
                "{} is over the {MAX_WINDOW_SECONDS}s maximum",
                format_duration(window)
            ),
        );
        DEFAULT_SHED_WINDOW
    } else {
        window
    };
    let recovery = match errs.percent(format!("{at}.recovery"), raw.recovery.as_ref()) {
        Some(v) if v <= 0.0 => {
            errs.push(format!("{at}.recovery"), "must be greater than 0%");
            DEFAULT_RECOVERY_PERCENT
        }
        Some(v) => v,
        None => DEFAULT_RECOVERY_PERCENT,
    } / 100.0;
    let restore_steps = match raw.restore_steps {
        Some(n @ 1..=MAX_RESTORE_STEPS) => n as u8,
        Some(n) => {
            errs.push(
                format!("{at}.restore_steps"),
                format!("must be within 1..={MAX_RESTORE_STEPS}, found {n}"),
            );
            DEFAULT_RESTORE_STEPS
        }
        None => DEFAULT_RESTORE_STEPS,
    };
    let min_requests = match raw.min_requests {
        Some(0) => {
            errs.push(format!("{at}.min_requests"), "must be at least 1, found 0");
            DEFAULT_SHED_MIN_REQUESTS
        }
        Some(n) => n,
        None => DEFAULT_SHED_MIN_REQUESTS,
    };
    SheddingConfig {
        descriptor,
        levels: p.levels.clone(),
        default,
        bounds,
        window,
        interval: errs.duration(
            format!("{at}.interval"),
            raw.interval.as_deref(),
            DEFAULT_SHED_INTERVAL,
        ),
        hold: errs.duration(format!("{at}.hold"), raw.hold.as_deref(), DEFAULT_SHED_HOLD),
        recovery,
        restore_steps,
        retry_after: errs.duration(
            format!("{at}.retry_after"),
            raw.retry_after.as_deref(),
            DEFAULT_RETRY_AFTER,
        ),
        min_requests,
    }
}

/// Milliseconds of the two latency bounds, the queue in requests, GPU
/// memory in percent; every one greater than 0.
fn bounds(at: &str, raw: &RawShedBounds, errs: &mut Errors) -> Signals {
    if raw.is_empty() {
        errs.push(
            at,
            "no bound set (token_cost_excess_p99, ttft_p95, queue or gpu_memory)",
        );
    }
    let at = format!("{at}.bounds");
    let mut ms = |key: &str, text: Option<&str>| {
        let text = text?;
        let path = format!("{at}.{key}");
        match parse_duration(text) {
            Ok(d) if d.is_zero() => {
                errs.push(path, "must be greater than 0");
                None
            }
            Ok(d) => Some(d.as_secs_f64() * 1000.0),
            Err(e) => {
                errs.push(path, e);
                None
            }
        }
    };
    let token_cost_excess_p99 = ms(
        "token_cost_excess_p99",
        raw.token_cost_excess_p99.as_deref(),
    );
    let ttft_p95 = ms("ttft_p95", raw.ttft_p95.as_deref());
    let queue = match raw.queue {
        Some(0) => {
            errs.push(format!("{at}.queue"), "must be at least 1, found 0");
            None
        }
        n => n.map(|n| n as f64),
    };
    let gpu_memory = match errs.percent(format!("{at}.gpu_memory"), raw.gpu_memory.as_ref()) {
        Some(v) if v <= 0.0 => {
            errs.push(format!("{at}.gpu_memory"), "must be greater than 0%");
            None
        }
        v => v,
    };
    Signals {
        token_cost_excess_p99,
        ttft_p95,
        queue,
        gpu_memory,
    }
}
