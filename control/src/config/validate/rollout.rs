//! Validation of `rollouts:`: defaults, units, steps, gates, and the route
//! and clusters each rollout drives. Fleet mode's fields are in `fleet`.

mod fleet;
mod mirror_gates;

use std::collections::HashMap;
use std::time::Duration;

use super::super::raw::{RawBound, RawGates, RawOnBreach, RawOnRestart, RawRollout};
use super::super::typed::*;
use super::Errors;
use crate::stats::MAX_WINDOW_SECONDS;
use sluice_filters::{format_duration, GrpcCodes, PlanRules, Price, GRPC_MAX_STATUS};

/// Prometheus keeps the history, so a window read there may be longer
/// than the stats rings' minute.
const MAX_PROMETHEUS_WINDOW: Duration = Duration::from_secs(3600);

pub(super) fn rollouts(
    raw: &[RawRollout],
    routes: &[RouteConfig],
    known: &[ClusterConfig],
    plans: &PlanRules,
    errs: &mut Errors,
) -> Vec<RolloutConfig> {
    let mut seen = HashMap::new();
    // route → (rollout, its path): a route has at most one rollout, since two
    // would fight over the same weights.
    let mut driven: HashMap<&str, (&str, String)> = HashMap::new();
    let mut out = Vec::new();
    for (i, r) in raw.iter().enumerate() {
        let at = format!("rollouts[{i}]");
        errs.item_name(&mut seen, &at, "rollout", &r.name);
        match driven.get(r.route.as_str()) {
            Some((other, path)) => errs.push(
                format!("{at}.route"),
                format!("route `{}` already has rollout `{other}` ({path})", r.route),
            ),
            None => {
                driven.insert(&r.route, (&r.name, at.clone()));
            }
        }
        let fleet = fleet::fleet(&at, r, errs);
        // A controller that reads Prometheus and writes to targets touches
        // nothing of this instance, so the route may live only on the
        // targets (a controller-only sluice has no routes).
        let remote =
            fleet.source.is_some() && (!fleet.targets.is_empty() || fleet.discovery.is_some());
        clusters(&at, r, routes, remote, errs);
        let scrape = fleet.scrape_interval();
        let mut rollout = RolloutConfig {
            name: r.name.clone(),
            route: r.route.clone(),
            stable: r.stable.clone(),
            canary: r.canary.clone(),
            steps: steps(&at, r.steps.as_deref(), errs),
            hold: errs.duration(format!("{at}.hold"), r.hold.as_deref(), DEFAULT_HOLD),
            min_requests: at_least_one(
                errs,
                format!("{at}.min_requests"),
                r.min_requests,
                DEFAULT_MIN_REQUESTS,
            ),
            // Prometheus has new figures once a scrape: evaluating faster
            // would count one scrape's breach `consecutive` times.
            interval: errs.duration(
                format!("{at}.interval"),
                r.interval.as_deref(),
                scrape.unwrap_or(DEFAULT_INTERVAL),
            ),
            window: window(&at, r.window.as_deref(), scrape, errs),
            consecutive: at_least_one(
                errs,
                format!("{at}.consecutive"),
                r.consecutive.map(u64::from),
                u64::from(DEFAULT_CONSECUTIVE),
            ) as u32,
            on_breach: match r.on_breach {
                Some(RawOnBreach::Pause) => OnBreach::Pause,
                Some(RawOnBreach::Rollback) | None => OnBreach::Rollback,
            },
            on_restart: match r.on_restart {
                Some(RawOnRestart::Pause) => OnRestart::Pause,
                Some(RawOnRestart::Continue) | None => OnRestart::Continue,
            },
            gates: gates(&format!("{at}.gates"), &r.gates, r.plan.is_some(), errs),
            source: fleet.source,
            targets: fleet.targets,
            discovery: fleet.discovery,
            reconcile_interval: fleet.reconcile_interval,
            fanout: fleet.fanout,
            target_token_env: fleet.token_env,
            canary_price: None,
            plan: None,
            p99_vs_stable_above_rps: None,
        };
        if r.plan.is_some() {
            super::plan::auto(&at, r, &mut rollout, known, plans, errs);
        }
        rollout.canary_price = canary_price(&at, r, &rollout.gates, known, remote, errs);
        mirror_gates::mirror_gates(&at, &rollout, routes, errs);
        out.push(rollout);
    }
    out
}

/// The route exists, and stable and canary are two different clusters of
/// its split (the weights the rollout moves). With `remote`, the route is
/// the targets' business and only stable ≠ canary is checked here.
fn clusters(at: &str, r: &RawRollout, routes: &[RouteConfig], remote: bool, errs: &mut Errors) {
    let route = routes.iter().find(|x| x.name == r.route);
    if route.is_none() && !remote {
        errs.push(
            format!("{at}.route"),
            format!("unknown route `{}`", r.route),
        );
    }
    if r.stable == r.canary {
        errs.push(
            format!("{at}.canary"),
            format!("must differ from stable (`{}`)", r.stable),
        );
    }
    let Some(route) = route.filter(|_| !remote) else {
        return;
    };
    for (field, cluster) in [("stable", &r.stable), ("canary", &r.canary)] {
        if !route.split.iter().any(|(c, _)| c == cluster) {
            errs.push(
                format!("{at}.{field}"),
                format!(
                    "cluster `{cluster}` is not in the split of route `{}`",
                    r.route
                ),
            );
        }
    }
}

/// The canary's price table, which `cost_per_1k_max` needs. A fleet
/// controller that does not list the canary reads the cost its targets
/// priced into `sluice_cost_usd_total`.
fn canary_price(
    at: &str,
    r: &RawRollout,
    gates: &Gates,
    known: &[ClusterConfig],
    remote: bool,
    errs: &mut Errors,
) -> Option<Price> {
    if !gates.bounds().iter().any(|(g, _)| *g == Gate::CostPer1kMax) {
        return None;
    }
    let Some((i, canary)) = known.iter().enumerate().find(|(_, c)| c.name == r.canary) else {
        if !remote {
            errs.push(
                format!("{at}.gates.{}", Gate::CostPer1kMax),
                format!("unknown canary cluster `{}` to price tokens by", r.canary),
            );
        }
        return None;
    };
    if canary.cost.is_none() {
        errs.push(
            format!("{at}.gates.{}", Gate::CostPer1kMax),
            format!(
                "canary cluster `{}` has no `cost:` price table (clusters[{i}].cost)",
                r.canary
            ),
        );
    }
    canary.cost.clone()
}

pub(super) fn steps(at: &str, raw: Option<&[u32]>, errs: &mut Errors) -> Vec<u32> {
    let Some(steps) = raw else {
        return DEFAULT_STEPS.to_vec();
    };
    let Some(&last) = steps.last() else {
        errs.push(format!("{at}.steps"), "at least one step is required");
        return DEFAULT_STEPS.to_vec();
    };
    let mut before = 0;
    for (j, &s) in steps.iter().enumerate() {
        if !(1..=100).contains(&s) {
            errs.push(
                format!("{at}.steps[{j}]"),
                format!("{s} is not within 1..=100"),
            );
        } else if s <= before {
            errs.push(
                format!("{at}.steps[{j}]"),
                format!("{s} must be greater than the step before ({before})"),
            );
        }
        before = before.max(s);
    }
    if last != 100 {
        errs.push(
            format!("{at}.steps"),
            format!("the last step must be 100, found {last}"),
        );
    }
    steps.to_vec()
}

/// Windows are merged from one-second buckets, of which sluice keeps at
/// most a minute: a fraction of a second is rounded up. Read from
/// Prometheus (`scrape`), a window may be longer, and must hold at least
/// four scrapes: `rate()` needs two samples in its range, and a scrape
/// arrives late now and then.
fn window(at: &str, raw: Option<&str>, scrape: Option<Duration>, errs: &mut Errors) -> Duration {
    let path = format!("{at}.window");
    let (default, max) = match scrape {
        None => (DEFAULT_WINDOW, Duration::from_secs(MAX_WINDOW_SECONDS)),
        Some(s) => (
            DEFAULT_WINDOW.max(s.saturating_mul(4)),
            MAX_PROMETHEUS_WINDOW,
        ),
    };
    let w = errs.duration(path.clone(), raw, default);
    if w > max {
        errs.push(
            path,
            format!(
                "{} is over the {}s maximum",
                format_duration(w),
                max.as_secs()
            ),
        );
        return max;
    }
    let w = Duration::from_secs(w.as_secs() + u64::from(w.subsec_nanos() > 0));
    if let Some(s) = scrape.filter(|s| w < s.saturating_mul(4)) {
        errs.push(
            path,
            format!(
                "{} is under 4 × source.prometheus.scrape_interval ({}): rate() needs at \
                 least two scrapes in the window; use {} or more",
                format_duration(w),
                format_duration(s),
                format_duration(s.saturating_mul(4))
            ),
        );
    }
    w
}

fn at_least_one(errs: &mut Errors, path: String, value: Option<u64>, default: u64) -> u64 {
    match value {
        Some(0) => {
            errs.push(path, "must be at least 1");
            default
        }
        Some(n) => n,
        None => default,
    }
}

/// Each gate's bound in its unit (milliseconds for durations); a gate
/// whose bound does not parse is left out, its error pushed.
fn gates(at: &str, g: &RawGates, planned: bool, errs: &mut Errors) -> Gates {
    // A plan brings its own (an error rate at least).
    if g.is_empty() && !planned {
        errs.push(at, "at least one gate is required");
    }
    let gates: Gates = g
        .bounds
        .iter()
        .filter_map(|(&gate, bound)| {
            let path = format!("{at}.{gate}");
            let value = match bound {
                RawBound::Duration(text) => {
                    let before = errs.0.len();
                    let d = errs.duration(path, Some(text), Duration::ZERO);
                    (errs.0.len() == before).then_some(d.as_secs_f64() * 1000.0)
                }
                RawBound::Percent(p) => errs.percent(path, Some(p)),
                RawBound::Ratio(r) => errs.positive(path, Some(*r)),
                RawBound::Requests(n) => Some(*n as f64),
                RawBound::Usd(p) => errs.usd(path, p),
            }?;
            if gate == Gate::EmbeddingSimilarityP10Min && value > 1.0 {
                errs.push(
                    format!("{at}.{gate}"),
                    format!("{value} is not within 0 (excluded) ..= 1: a cosine similarity"),
                );
            }
            Some((gate, value))
        })
        .collect();
    let mut gates = if g.exclude_load == Some(true) {
        gates.excluding_load()
    } else {
        gates
    };
    if let Some(codes) = &g.grpc_failure_codes {
        gates.grpc_failures = grpc_failure_codes(at, codes, g, errs);
    }
    gates
}

/// `gates.grpc_failure_codes`: gRPC codes 0..=16, at least one, and only
/// beside the gate that reads them.
fn grpc_failure_codes(at: &str, codes: &[u32], g: &RawGates, errs: &mut Errors) -> GrpcCodes {
    let path = format!("{at}.grpc_failure_codes");
    if !g.bounds.contains_key(&Gate::GrpcSuccessRateMin) {
        errs.push(
            path.clone(),
            "read only by grpc_success_rate_min, which is not set",
        );
    }
    if codes.is_empty() {
        errs.push(
            path.clone(),
            "lists no code: every call would count as a success",
        );
    }
    for (i, &code) in codes.iter().enumerate() {
        if code > GRPC_MAX_STATUS {
            errs.push(
                format!("{path}[{i}]"),
                format!("{code} is not a gRPC status code from 0 to {GRPC_MAX_STATUS}"),
            );
        }
    }
    GrpcCodes::of(codes.iter().copied())
}
