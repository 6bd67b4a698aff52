//! Validation of `routes`: listeners, match blocks and splits.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use sluice_filters::{check_redis_target, format_duration, Descriptor, Limits, Matcher, ModelGlob};

use super::super::raw::{
    RawLimitStore, RawLimits, RawListener, RawOnUnavailable, RawProtocol, RawRoute,
};
use super::super::typed::*;
use super::Errors;

pub(super) fn routes(
    raw: &[RawRoute],
    listeners: &[RawListener],
    clusters: &[ClusterConfig],
    errs: &mut Errors,
) -> Vec<RouteConfig> {
    let mut seen = HashMap::new();
    raw.iter()
        .enumerate()
        .map(|(i, r)| {
            let at = format!("routes[{i}]");
            errs.item_name(&mut seen, &at, "route", &r.name);
            match listeners.iter().find(|l| l.name == r.listener) {
                None => errs.push(
                    format!("{at}.listener"),
                    format!("unknown listener `{}`", r.listener),
                ),
                Some(l) if l.protocol == RawProtocol::Tcp => errs.push(
                    format!("{at}.listener"),
                    format!(
                        "listener `{}` is tcp; routes need an http or https listener",
                        r.listener
                    ),
                ),
                Some(_) => {}
            }
            let matcher = matcher(&at, r, errs);
            // Whether a cluster of the split has its queue gauge scraped.
            let scraped = r.split.keys().any(|name| {
                clusters
                    .iter()
                    .any(|c| &c.name == name && c.metrics_path.is_some())
            });
            let split = split(&at, r, clusters, errs);
            RouteConfig {
                name: r.name.clone(),
                listener: r.listener.clone(),
                matcher,
                mirror: r
                    .mirror
                    .as_ref()
                    .map(|m| super::mirror::mirror(&at, m, &split, clusters, errs)),
                split,
                sticky: r.sticky.as_ref().map(|s| StickyConfig {
                    header: errs.header_name(format!("{at}.sticky.header"), &s.header),
                }),
                allow_version_header: r.allow_version_header.unwrap_or(false),
                allow_header_faults: r.allow_header_faults.unwrap_or(false),
                rewrite_model: rewrite(&at, r, errs),
                limits: r
                    .limits
                    .as_ref()
                    .map(|l| limits(&format!("{at}.limits"), l, errs)),
                max_body: route_max_body(&at, r, errs),
                shedding: r.shedding.as_ref().map(|s| {
                    super::shedding::shedding(&format!("{at}.shedding"), s, scraped, errs)
                }),
            }
        })
        .collect()
}

fn matcher(at: &str, r: &RawRoute, errs: &mut Errors) -> Matcher {
    let Some(m) = &r.matcher else {
        return Matcher::default();
    };
    if let Some(p) = &m.path_prefix {
        if !p.starts_with('/') {
            errs.push(
                format!("{at}.match.path_prefix"),
                format!("`{p}` must start with `/`"),
            );
        }
    }
    let model = m.model.as_deref().map(|glob| {
        if glob.trim().is_empty() {
            errs.push(format!("{at}.match.model"), "must not be empty");
        }
        ModelGlob::new(glob)
    });
    Matcher {
        path_prefix: m.path_prefix.clone(),
        host: m.host.as_ref().map(|h| h.to_ascii_lowercase()),
        headers: errs.header_matches(at, &m.headers),
        model,
    }
}

/// `rewrite`: every key a cluster of the route's split, every model named.
fn rewrite(at: &str, r: &RawRoute, errs: &mut Errors) -> BTreeMap<String, String> {
    for (cluster, rw) in &r.rewrite {
        if !r.split.contains_key(cluster) {
            errs.push(
                format!("{at}.rewrite.{cluster}"),
                format!("`{cluster}` is not in the route's split"),
            );
        }
        if rw.model.trim().is_empty() {
            errs.push(format!("{at}.rewrite.{cluster}.model"), "must not be empty");
        }
    }
    r.rewrite
        .iter()
        .map(|(c, rw)| (c.clone(), rw.model.clone()))
        .collect()
}

fn split(
    at: &str,
    r: &RawRoute,
    clusters: &[ClusterConfig],
    errs: &mut Errors,
) -> Vec<(String, u32)> {
    if r.split.is_empty() {
        errs.push(format!("{at}.split"), "at least one cluster is required");
        return Vec::new();
    }
    for name in r.split.keys() {
        match clusters.iter().find(|c| &c.name == name) {
            None => errs.push(
                format!("{at}.split.{name}"),
                format!("unknown cluster `{name}`"),
            ),
            Some(c) if c.kind == ClusterKind::Cache => errs.push(
                format!("{at}.split.{name}"),
                format!("cluster `{name}` is kind cache, which only tcp listeners serve"),
            ),
            Some(_) => {}
        }
    }
    let total: u64 = r.split.values().map(|w| u64::from(*w)).sum();
    if total == 0 {
        errs.push(format!("{at}.split"), "weights sum to 0");
    }
    r.split.iter().map(|(k, v)| (k.clone(), *v)).collect()
}

/// `limits`: known descriptor forms, every limit at least 1, at least one set.
fn limits(at: &str, raw: &RawLimits, errs: &mut Errors) -> LimitsConfig {
    let mut descriptor = Vec::new();
    for (i, form) in raw.descriptor.iter().enumerate() {
        match Descriptor::parse(form) {
            Some(d) => descriptor.push(d),
            None => errs.push(
                format!("{at}.descriptor[{i}]"),
                format!("unknown descriptor `{form}` (route, model or header:NAME)"),
            ),
        }
    }
    if raw.descriptor.is_empty() {
        descriptor.push(Descriptor::Route);
    }
    let mut at_least_one = |key: &str, value: Option<u64>| {
        if value == Some(0) {
            errs.push(format!("{at}.{key}"), "must be at least 1, found 0");
        }
        value
    };
    let limits = Limits {
        requests_per_minute: at_least_one("requests_per_minute", raw.requests_per_minute),
        input_tokens_per_minute: at_least_one(
            "input_tokens_per_minute",
            raw.input_tokens_per_minute,
        ),
        output_tokens_per_minute: at_least_one(
            "output_tokens_per_minute",
            raw.output_tokens_per_minute,
        ),
        total_tokens_per_minute: at_least_one(
            "total_tokens_per_minute",
            raw.total_tokens_per_minute,
        ),
        concurrent_streams: at_least_one("concurrent_streams", raw.concurrent_streams),
    };
    let default_max_tokens =
        at_least_one("default_max_tokens", raw.default_max_tokens).unwrap_or(DEFAULT_MAX_TOKENS);
    if limits == Limits::default() {
        errs.push(
            at,
            "no limit set (requests_per_minute, input_tokens_per_minute, \
             output_tokens_per_minute, total_tokens_per_minute or concurrent_streams)",
        );
    }
    let store = raw
        .store
        .as_ref()
        .and_then(|s| store(&format!("{at}.store"), s, errs));
    LimitsConfig {
        descriptor,
        limits,
        default_max_tokens,
        store,
    }
}

/// `max_body`: at least a byte, as large as one likes.
fn route_max_body(at: &str, r: &RawRoute, errs: &mut Errors) -> u64 {
    let path = format!("{at}.max_body");
    match errs.size(path.clone(), r.max_body.as_ref()) {
        Some(0) => {
            errs.push(path, "must be at least 1 byte");
            DEFAULT_ROUTE_MAX_BODY
        }
        Some(n) => n,
        None => DEFAULT_ROUTE_MAX_BODY,
    }
}

/// Syncs closer than this would load the store more than they would gain;
/// farther apart, leases would move too slowly between sluices.
const SYNC_INTERVAL: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(10));

/// `limits.store`: a redis URL as the load half's redis steps take it, a
/// sync interval within bounds, a non-empty key prefix.
fn store(at: &str, raw: &RawLimitStore, errs: &mut Errors) -> Option<LimitStore> {
    let Some(redis) = &raw.redis else {
        errs.push(at, "names no store (redis)");
        return None;
    };
    let at = format!("{at}.redis");
    if let Err(m) = check_redis_target(&redis.url) {
        errs.push(format!("{at}.url"), m);
    }
    let sync_interval = errs.duration(
        format!("{at}.sync_interval"),
        redis.sync_interval.as_deref(),
        DEFAULT_SYNC_INTERVAL,
    );
    let (low, high) = SYNC_INTERVAL;
    if !(low..=high).contains(&sync_interval) {
        errs.push(
            format!("{at}.sync_interval"),
            format!(
                "must be within {} ..= {}, found {}",
                format_duration(low),
                format_duration(high),
                format_duration(sync_interval)
            ),
        );
    }
    if redis.key_prefix.as_deref() == Some("") {
        errs.push(format!("{at}.key_prefix"), "must not be empty");
    }
    Some(LimitStore {
        url: redis.url.clone(),
        sync_interval,
        on_unavailable: match redis.on_unavailable {
            None | Some(RawOnUnavailable::Open) => OnUnavailable::Open,
            Some(RawOnUnavailable::Closed) => OnUnavailable::Closed,
        },
        key_prefix: redis
            .key_prefix
            .clone()
            .unwrap_or_else(|| DEFAULT_KEY_PREFIX.to_owned()),
    })
}
