//! The `/v1/` endpoints: config, routes and their splits, stats, events,
//! and what the observers saw (GPUs, upstream load). Rollouts have their
//! own module.
//! Every change goes through the store, so it is validated whole, swapped in
//! atomically and written to the audit log.

use std::collections::BTreeMap;

use http::StatusCode;
use serde::Serialize;
use serde_json::Value;

use super::respond::{self, ApiResponse};
use crate::config::{ConfigError, ConfigErrors, RawConfig, RawRoute, RouteConfig};
use crate::events::EventLog;
use crate::gpu::GpuWatcher;
use crate::stats::{Stats, StatsRow, WINDOW_SECONDS};
use crate::store::SnapshotStore;
use crate::upstream_metrics::UpstreamScraper;

#[derive(Serialize)]
struct ConfigView<'a> {
    version: u64,
    hash: &'a str,
    config: &'a RawConfig,
}

#[derive(Serialize)]
struct Applied<'a> {
    version: u64,
    hash: &'a str,
}

#[derive(Serialize)]
struct Sticky<'a> {
    header: &'a str,
}

#[derive(Serialize)]
struct RouteView<'a> {
    name: &'a str,
    listener: &'a str,
    split: BTreeMap<&'a str, u32>,
    sticky: Option<Sticky<'a>>,
}

impl<'a> RouteView<'a> {
    fn of(route: &'a RouteConfig) -> Self {
        RouteView {
            name: &route.name,
            listener: &route.listener,
            split: route.split.iter().map(|(c, w)| (c.as_str(), *w)).collect(),
            sticky: route.sticky.as_ref().map(|s| Sticky { header: &s.header }),
        }
    }
}

#[derive(Serialize)]
struct SplitSet<'a> {
    route: &'a str,
    split: &'a BTreeMap<String, u32>,
    version: u64,
}

#[derive(Serialize)]
struct StatsView {
    window_seconds: u64,
    dropped_samples: u64,
    stats: Vec<StatsRow>,
}

#[derive(Serialize)]
struct EventsView {
    events: Vec<crate::events::Event>,
}

pub(super) fn get_config(store: &SnapshotStore) -> ApiResponse {
    let snapshot = store.load();
    respond::json(
        StatusCode::OK,
        &ConfigView {
            version: snapshot.version,
            hash: &snapshot.hash,
            config: &snapshot.config.raw,
        },
    )
}

/// Replaces the whole config with `body` (YAML or JSON). A parse error is
/// rejected through the store too, so that it reaches the audit log.
pub(super) fn put_config(store: &SnapshotStore, body: &[u8]) -> ApiResponse {
    // Validated before the writers' lock is taken (see `replace`); a body
    // that does not parse is recorded as a rejected change all the same.
    let result = match respond::parse_body(body, RawConfig::from_yaml) {
        Ok(raw) => store.replace("api", raw),
        Err(errors) => store.apply("api", "replace config", move |_| Err(errors)),
    };
    store.count_reload("api", result.is_ok());
    match result {
        Ok(snapshot) => respond::json(
            StatusCode::OK,
            &Applied {
                version: snapshot.version,
                hash: &snapshot.hash,
            },
        ),
        Err(errors) => respond::config_errors(&errors),
    }
}

pub(super) fn get_routes(store: &SnapshotStore) -> ApiResponse {
    let snapshot = store.load();
    let routes: Vec<RouteView<'_>> = snapshot.config.routes.iter().map(RouteView::of).collect();
    respond::json(StatusCode::OK, &routes)
}

/// Why a change to one route was not applied.
pub(super) enum RouteEdit {
    /// The route was removed between the caller's check and the write lock.
    Vanished,
    Invalid(ConfigErrors),
}

/// Applies `edit` to the route named `route` through the store, so the whole
/// config is validated and the change audited like any other.
pub(super) fn edit_route(
    store: &SnapshotStore,
    action: &str,
    route: &str,
    edit: impl FnOnce(&mut RawRoute),
) -> Result<std::sync::Arc<crate::Snapshot>, RouteEdit> {
    let mut vanished = false;
    let result = store.apply("api", action, |raw| {
        match raw.routes.iter_mut().find(|r| r.name == route) {
            Some(r) => {
                edit(r);
                Ok(())
            }
            None => {
                vanished = true;
                Err(ConfigErrors(vec![ConfigError::new(
                    "route",
                    format!("unknown route `{route}`"),
                )]))
            }
        }
    });
    result.map_err(|errors| match vanished {
        true => RouteEdit::Vanished,
        false => RouteEdit::Invalid(errors),
    })
}

/// Whether the live config has the route: checked before the body is
/// parsed, and again by [`edit_route`] under the store's lock.
pub(super) fn has_route(store: &SnapshotStore, route: &str) -> bool {
    store.load().config.route(route).is_some()
}

pub(super) fn unknown_route(route: &str) -> ApiResponse {
    respond::error_at(
        StatusCode::NOT_FOUND,
        &format!("unknown route `{route}`"),
        "route",
    )
}

/// Replaces a route's split entirely with the weights in `body`.
pub(super) fn put_split(store: &SnapshotStore, route: &str, body: &[u8]) -> ApiResponse {
    if !has_route(store, route) {
        return unknown_route(route);
    }
    let split = match parse_split(body) {
        Ok(split) => split,
        Err((message, path)) => return respond::error_at(StatusCode::BAD_REQUEST, &message, &path),
    };
    let action = format!("set split of route {route}");
    match edit_route(store, &action, route, |r| r.split = split) {
        Ok(snapshot) => {
            let empty = BTreeMap::new();
            let split = snapshot
                .config
                .raw
                .route(route)
                .map_or(&empty, |r| &r.split);
            respond::json(
                StatusCode::OK,
                &SplitSet {
                    route,
                    split,
                    version: snapshot.version,
                },
            )
        }
        Err(RouteEdit::Vanished) => unknown_route(route),
        Err(RouteEdit::Invalid(errors)) => respond::config_errors(&errors),
    }
}

/// A split body is a JSON object of cluster names to non-negative integer
/// weights; anything else is refused with what is wrong and its path.
fn parse_split(body: &[u8]) -> Result<BTreeMap<String, u32>, (String, String)> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        (
            format!("body must be a JSON object of cluster weights: {e}"),
            "split".to_string(),
        )
    })?;
    let Value::Object(map) = value else {
        return Err((
            format!(
                "must be a JSON object of cluster weights, found {}",
                kind(&value)
            ),
            "split".to_string(),
        ));
    };
    let mut split = BTreeMap::new();
    for (cluster, weight) in map {
        let Some(w) = weight.as_u64().and_then(|w| u32::try_from(w).ok()) else {
            return Err((
                format!(
                    "weight must be an integer from 0 to {}, found {weight}",
                    u32::MAX
                ),
                format!("split.{cluster}"),
            ));
        };
        split.insert(cluster, w);
    }
    Ok(split)
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(super) fn get_stats(stats: &Stats) -> ApiResponse {
    respond::json(
        StatusCode::OK,
        &StatsView {
            window_seconds: WINDOW_SECONDS,
            dropped_samples: stats.dropped(),
            stats: stats.rows(),
        },
    )
}

pub(super) fn get_events(events: &EventLog) -> ApiResponse {
    respond::json(
        StatusCode::OK,
        &EventsView {
            events: events.list(),
        },
    )
}

/// The GPUs as last polled; without a watcher, unavailable and why.
pub(super) fn get_gpu(gpu: Option<&GpuWatcher>) -> ApiResponse {
    let view = match gpu {
        Some(gpu) => gpu.snapshot(),
        None => serde_json::json!({
            "available": false,
            "reason": "GPU watcher not running",
            "devices": [],
            "polled_at_ms": null,
        }),
    };
    respond::json(StatusCode::OK, &view)
}

/// The model servers' load as last scraped, per cluster and endpoint.
pub(super) fn get_upstreams(upstreams: Option<&UpstreamScraper>) -> ApiResponse {
    let view = match upstreams {
        Some(u) => u.snapshot(),
        None => serde_json::json!({ "clusters": [] }),
    };
    respond::json(StatusCode::OK, &view)
}
