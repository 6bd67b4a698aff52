//! A proxy's toxics: Toxiproxy's toxic calls, and each toxic as a sluice
//! fault experiment, matched on the proxy's listener, `toxicity` as the
//! share of new connections, the default TTL, and the toxic as the action,
//! added and removed through the store's one apply path (so it lands in
//! `/v1/faults` and the audit log).

use std::time::Duration;

use serde_json::{json, Value};
use sluice_filters::{Direction, ToxicSpec};

use http::StatusCode;

use super::proxies::{listener_name, Answer, Toxic as Entry, Toxiproxy, SOURCE};
use crate::config::{ConfigError, ConfigErrors, RawFault};
use crate::fault::{new_fault_id, FaultState};
use crate::snapshot::Snapshot;
use crate::store::SnapshotStore;

/// Sluice's durations to the microsecond, which every Toxiproxy unit is.
fn duration(d: Duration) -> String {
    format!("{}us", d.as_micros())
}

fn direction(d: Direction) -> &'static str {
    match d {
        Direction::Upstream => "upstream",
        Direction::Downstream => "downstream",
    }
}

/// The `faults:` item of toxic `spec` on proxy `proxy`.
pub(super) fn fault_item(id: &str, proxy: &str, ttl: Duration, spec: &ToxicSpec) -> Value {
    use sluice_filters::Toxic;
    let action = match &spec.toxic {
        Toxic::Latency {
            latency,
            jitter,
            direction: d,
        } => json!({"latency": {"latency": duration(*latency), "jitter": duration(*jitter),
                                "direction": direction(*d)}}),
        Toxic::Bandwidth {
            bytes_per_sec,
            direction: d,
        } => json!({"bandwidth": {"bytes_per_sec": bytes_per_sec, "direction": direction(*d)}}),
        Toxic::Slicer {
            average_size,
            size_variation,
            delay,
            direction: d,
        } => json!({"slicer": {"average_size": average_size, "size_variation": size_variation,
                               "delay": duration(*delay), "direction": direction(*d)}}),
        Toxic::SlowClose { delay } => json!({"slow_close": {"delay": duration(*delay)}}),
        Toxic::Timeout { timeout } => json!({"timeout": {"timeout": duration(*timeout)}}),
        Toxic::ResetPeer { timeout } => json!({"reset_peer": {"timeout": duration(*timeout)}}),
        Toxic::LimitData {
            bytes,
            direction: d,
        } => json!({"limit_data": {"bytes": bytes, "direction": direction(*d)}}),
    };
    json!({
        "id": id,
        "match": {"listener": listener_name(proxy)},
        "percent": spec.percent(),
        "ttl": duration(ttl),
        "action": action,
    })
}

/// Adds the toxic's experiment; its id, or why the config refused it.
pub(super) fn add(
    store: &SnapshotStore,
    ttl: Duration,
    proxy: &str,
    spec: &ToxicSpec,
) -> Result<String, String> {
    // `f-` ids are the API's; these say where they came from.
    let id = format!("toxiproxy-{}", new_fault_id().trim_start_matches("f-"));
    let raw: RawFault = serde_json::from_value(fault_item(&id, proxy, ttl, spec))
        .map_err(|e| format!("as an experiment: {e}"))?;
    let action = format!("add toxic {} to proxy {proxy} as fault {id}", spec.name);
    let max = |c: &crate::config::Config| c.runtime.max_experiments;
    store
        .apply_config(SOURCE, &action, |config| {
            if config.raw.faults.len() >= max(config) {
                return Err(ConfigErrors(vec![ConfigError::new(
                    "faults",
                    format!(
                        "at the limit of {} experiments (runtime.max_experiments)",
                        max(config)
                    ),
                )]));
            }
            config.with_fault(raw)
        })
        .map(|_| id)
        .map_err(|errors| {
            errors
                .0
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        })
}

/// Removes experiment `id` if the config still has it.
pub(super) fn remove(store: &SnapshotStore, id: &str, why: &str) {
    if !store
        .load()
        .config
        .raw
        .faults
        .iter()
        .any(|f| f.id.as_deref() == Some(id))
    {
        return;
    }
    let _ = store.apply_config(SOURCE, &format!("{why}: fault {id}"), |config| {
        config.without_fault(id).ok_or_else(|| {
            ConfigErrors(vec![ConfigError::new(
                "id",
                format!("unknown fault `{id}`"),
            )])
        })
    });
}

/// Whether experiment `id` is in the config and may still fire.
pub(super) fn is_active(snapshot: &Snapshot, id: &str) -> bool {
    let now = tokio::time::Instant::now().into_std();
    snapshot
        .faults
        .iter()
        .find(|f| f.experiment.id == id)
        .is_some_and(|f| f.state_at(now) == FaultState::Active)
}

impl Toxiproxy {
    pub(super) fn toxics(&self, name: &str) -> Answer {
        match self.proxies().get(name) {
            Some(p) => Answer::json(StatusCode::OK, p.toxics_json()),
            None => Answer::proxy_not_found(),
        }
    }

    pub(super) fn toxic(&self, name: &str, toxic: &str) -> Answer {
        let proxies = self.proxies();
        let Some(proxy) = proxies.get(name) else {
            return Answer::proxy_not_found();
        };
        match proxy.toxics.iter().find(|t| t.spec.name == toxic) {
            Some(t) => Answer::json(StatusCode::OK, t.spec.to_json()),
            None => Answer::error(StatusCode::NOT_FOUND, "toxic not found"),
        }
    }

    pub(super) fn add_toxic(&self, name: &str, body: &Value) -> Answer {
        let mut proxies = self.proxies();
        let Some(proxy) = proxies.get_mut(name) else {
            return Answer::proxy_not_found();
        };
        let spec = match ToxicSpec::parse(body) {
            Ok(spec) => spec,
            Err(e) => return Answer::bad_body(e),
        };
        if proxy.toxics.iter().any(|t| t.spec.name == spec.name) {
            return Answer::error(StatusCode::CONFLICT, "toxic already exists");
        }
        match add(&self.store, self.ttl, name, &spec) {
            Ok(fault) => {
                let answer = Answer::json(StatusCode::OK, spec.to_json());
                proxy.toxics.push(Entry { spec, fault });
                answer
            }
            Err(e) => Answer::bad_body(e),
        }
    }

    /// New attributes or toxicity: the experiment is replaced (its TTL
    /// starts again, as the toxic is new to sluice).
    pub(super) fn update_toxic(&self, name: &str, toxic: &str, body: &Value) -> Answer {
        let mut proxies = self.proxies();
        let Some(proxy) = proxies.get_mut(name) else {
            return Answer::proxy_not_found();
        };
        let Some(entry) = proxy.toxics.iter_mut().find(|t| t.spec.name == toxic) else {
            return Answer::error(StatusCode::NOT_FOUND, "toxic not found");
        };
        let spec = match entry.spec.updated(body) {
            Ok(spec) => spec,
            Err(e) => return Answer::bad_body(e),
        };
        match add(&self.store, self.ttl, name, &spec) {
            Ok(fault) => {
                remove(&self.store, &entry.fault, "replace toxic");
                let answer = Answer::json(StatusCode::OK, spec.to_json());
                *entry = Entry { spec, fault };
                answer
            }
            Err(e) => Answer::bad_body(e),
        }
    }

    pub(super) fn remove_toxic(&self, name: &str, toxic: &str) -> Answer {
        let mut proxies = self.proxies();
        let Some(proxy) = proxies.get_mut(name) else {
            return Answer::proxy_not_found();
        };
        let Some(i) = proxy.toxics.iter().position(|t| t.spec.name == toxic) else {
            return Answer::error(StatusCode::NOT_FOUND, "toxic not found");
        };
        let gone = proxy.toxics.remove(i);
        remove(&self.store, &gone.fault, "remove toxic");
        Answer::empty()
    }
}
