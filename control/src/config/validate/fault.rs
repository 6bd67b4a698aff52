//! Validation of `faults:`: ids, match references, share, TTL (bounded by
//! `runtime.max_fault_ttl`), `halt_if`, and exactly one action that fits
//! the listener it acts on (toxics on tcp listeners, the rest on HTTP).

mod action;

use std::collections::HashMap;
use std::time::Duration;

use sluice_filters::{Experiment, FaultKind, FaultMatch, HaltIf};

use super::super::raw::{RawFault, RawFaultMatch, RawProtocol};
use super::super::typed::*;
use super::super::ConfigErrors;
use super::Errors;
use crate::stats::MAX_WINDOW_SECONDS;
use sluice_filters::parse_duration;

pub(super) const DEFAULT_MAX_FAULT_TTL: Duration = Duration::from_secs(3600);
/// The most one experiment may take as JSON: with `max_experiments` at its
/// default, the experiments of `GET /v1/config` take at most 8 MiB of the
/// 16 MiB `PUT /v1/config` accepts.
pub(crate) const MAX_FAULT_BYTES: usize = 8 * 1024;
const DEFAULT_HALT_WINDOW: Duration = Duration::from_secs(10);
/// How the listener of a proxy added through Toxiproxy's API is named
/// (`toxiproxy:redis`): the `:` is outside the config's name alphabet, so
/// no configured listener can take such a name.
pub const RUNTIME_LISTENER_PREFIX: &str = "toxiproxy:";

/// What an experiment's references are checked against.
pub(super) struct Known<'a> {
    pub listeners: &'a [super::super::raw::RawListener],
    pub routes: &'a [RouteConfig],
    pub clusters: &'a [ClusterConfig],
    pub max_ttl: Duration,
}

pub(super) fn faults(raw: &[RawFault], known: &Known<'_>, errs: &mut Errors) -> Vec<Experiment> {
    let mut seen = HashMap::new();
    let mut out = Vec::new();
    for (i, f) in raw.iter().enumerate() {
        let at = format!("faults[{i}]");
        if let Some(id) = &f.id {
            errs.unique(&mut seen, format!("{at}.id"), "fault", id);
        }
        out.extend(fault(&at, f, known, errs));
    }
    out
}

/// One experiment; `None` when something is wrong (every error is pushed).
pub(super) fn fault(
    at: &str,
    f: &RawFault,
    known: &Known<'_>,
    errs: &mut Errors,
) -> Option<Experiment> {
    let before = errs.0.len();
    let bytes = serde_json::to_vec(f).map_or(0, |v| v.len());
    if bytes > MAX_FAULT_BYTES {
        errs.push(
            at,
            format!("{bytes} bytes as JSON, over the {MAX_FAULT_BYTES} an experiment may take"),
        );
    }
    let id = match &f.id {
        Some(id) => {
            errs.name(format!("{at}.id"), id);
            id.clone()
        }
        None => {
            errs.push(format!("{at}.id"), "required");
            String::new()
        }
    };
    let empty = RawFaultMatch::default();
    let m = f.matcher.as_ref().unwrap_or(&empty);
    let on_tcp = matcher_refs(at, m, known, errs);
    let matcher = FaultMatch {
        route: m.route.clone(),
        cluster: m.cluster.clone(),
        listener: m.listener.clone(),
        headers: errs.header_matches(at, &m.headers),
        model: m.model.clone(),
    };
    let share = errs
        .percent(format!("{at}.percent"), f.percent.as_ref())
        .unwrap_or(100.0);
    let ttl = ttl(at, f.ttl.as_deref(), known.max_ttl, errs);
    if f.max_active == Some(0) {
        errs.push(format!("{at}.max_active"), "must be at least 1");
    }
    let halt_if = f.halt_if.as_ref().and_then(|h| {
        let path = format!("{at}.halt_if");
        if m.route.is_none() {
            errs.push(
                path.clone(),
                "needs match.route: the route whose error rate it reads",
            );
        }
        let error_rate = errs.percent(format!("{path}.error_rate"), Some(&h.error_rate))?;
        let window = errs.duration(
            format!("{path}.window"),
            h.window.as_deref(),
            DEFAULT_HALT_WINDOW,
        );
        if window > Duration::from_secs(MAX_WINDOW_SECONDS) {
            errs.push(
                format!("{path}.window"),
                format!("must be at most {MAX_WINDOW_SECONDS}s"),
            );
        }
        Some(HaltIf { error_rate, window })
    });
    let action = action::action(at, f.action.as_ref(), on_tcp, errs);
    if let Some(a) = &action {
        if a.kind() == FaultKind::Tcp && !m.headers.is_empty() {
            errs.push(
                format!("{at}.match.headers"),
                "a tcp connection has no headers to match",
            );
        }
        if a.kind() == FaultKind::Tcp && f.halt_if.is_some() {
            errs.push(format!("{at}.halt_if"), "not allowed on a tcp listener");
        }
    }
    if errs.0.len() > before {
        return None;
    }
    Some(Experiment {
        id,
        matcher,
        percent: share,
        ttl: ttl?,
        max_active: f.max_active,
        halt_if,
        action: action?,
    })
}

/// Checks the names the match block refers to. Returns whether the
/// experiment acts on a tcp listener.
fn matcher_refs(at: &str, m: &RawFaultMatch, known: &Known<'_>, errs: &mut Errors) -> bool {
    let mut on_tcp = false;
    if let Some(l) = &m.listener {
        // A proxy added through Toxiproxy's API is a tcp listener that the
        // config does not list; it may be gone (a toxic outlives nothing,
        // it just matches no connection then).
        if l.starts_with(RUNTIME_LISTENER_PREFIX) {
            on_tcp = true;
        } else {
            match known.listeners.iter().find(|x| &x.name == l) {
                Some(x) => on_tcp = x.protocol == RawProtocol::Tcp,
                None => errs.push(
                    format!("{at}.match.listener"),
                    format!("unknown listener `{l}`"),
                ),
            }
        }
    }
    if let Some(r) = &m.route {
        if !known.routes.iter().any(|x| &x.name == r) {
            errs.push(format!("{at}.match.route"), format!("unknown route `{r}`"));
        } else if on_tcp {
            errs.push(format!("{at}.match.route"), "a tcp listener has no routes");
        }
    }
    if let Some(c) = &m.cluster {
        if !known.clusters.iter().any(|x| &x.name == c) {
            errs.push(
                format!("{at}.match.cluster"),
                format!("unknown cluster `{c}`"),
            );
        }
    }
    on_tcp
}

fn ttl(at: &str, text: Option<&str>, max: Duration, errs: &mut Errors) -> Option<Duration> {
    let path = format!("{at}.ttl");
    let Some(text) = text else {
        errs.push(path, "required (how long the experiment may fire, e.g. 5m)");
        return None;
    };
    let ttl = errs.duration(path.clone(), Some(text), Duration::ZERO);
    if ttl > max {
        errs.push(
            path,
            format!(
                "`{text}` is longer than the maximum {} (runtime.max_fault_ttl)",
                sluice_filters::format_duration(max)
            ),
        );
        return None;
    }
    (!ttl.is_zero()).then_some(ttl)
}

/// A duration that may be zero (jitter, a toxic's timeout).
pub(super) fn zero_or_more(errs: &mut Errors, path: String, text: Option<&str>) -> Duration {
    let Some(text) = text else {
        return Duration::ZERO;
    };
    parse_duration(text).unwrap_or_else(|e| {
        errs.push(path, e);
        Duration::ZERO
    })
}

impl Config {
    /// This config with `raw` appended to `faults:`, the new experiment
    /// validated alone: the others and the rest of the config were valid
    /// already and nothing in them refers to an experiment. Errors are at
    /// `faults[N]`, the place it would have taken.
    pub(crate) fn with_fault(&self, raw: RawFault) -> Result<Config, ConfigErrors> {
        let at = format!("faults[{}]", self.raw.faults.len());
        let mut errs = Errors::default();
        if let Some(id) = &raw.id {
            if let Some(i) = self
                .raw
                .faults
                .iter()
                .position(|f| f.id.as_ref() == Some(id))
            {
                errs.push(
                    format!("{at}.id"),
                    format!("duplicate fault `{id}` (first at faults[{i}].id)"),
                );
            }
        }
        let known = Known {
            listeners: &self.raw.listeners,
            routes: &self.routes,
            clusters: &self.clusters,
            max_ttl: self.runtime.max_fault_ttl,
        };
        let experiment = fault(&at, &raw, &known, &mut errs);
        match experiment {
            Some(e) if errs.0.is_empty() => {
                let mut next = self.clone();
                next.raw.faults.push(raw);
                next.faults.push(e);
                Ok(next)
            }
            _ => Err(ConfigErrors(errs.0)),
        }
    }

    /// This config without the experiment `id`; `None` when it has none.
    pub(crate) fn without_fault(&self, id: &str) -> Option<Config> {
        let i = self
            .raw
            .faults
            .iter()
            .position(|f| f.id.as_deref() == Some(id))?;
        let mut next = self.clone();
        next.raw.faults.remove(i);
        next.faults.remove(i);
        Some(next)
    }
}
