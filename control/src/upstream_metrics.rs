//! Scrapes the model servers' own Prometheus metrics (vLLM, llama.cpp) into
//! `sluice_upstream_*` gauges and keeps the latest load of each cluster in
//! memory for the rollout gates. Off the request path entirely: one task
//! re-reads the cluster list from the live snapshot each round, so clusters
//! added, removed or changed at run time are followed.
//!
//! A cluster is scraped when it is `kind: llm` with a `metrics_path`, every
//! `metrics_interval`, each endpoint over plain HTTP/1.1 with a 2 s bound.
//! Clusters with upstream TLS are skipped (said once): this task carries no
//! TLS client, and a plain request to a TLS port would only count errors.
//! After each round the endpoints' KV-cache ratios are published for the
//! data plane ([`KvCacheReadings`]).

mod families;
mod parse;
mod readings;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::header::{ACCEPT, HOST, USER_AGENT};
use http::{HeaderValue, Request, StatusCode, Uri};
use http_body_util::Full;
use prometheus::Registry;
use serde::Serialize;
use serde_json::Value;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::config::{ClusterKind, Config, Endpoint};
use crate::http_client::HttpClient;
use crate::store::SnapshotStore;
use families::Families;
pub(crate) use families::WAITING_METRIC;
use parse::EndpointLoad;
pub use readings::KvCacheReadings;

/// Bounds one scrape: connect, answer and body together.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);
/// A metrics page larger than this is refused (vLLM's is ~100 KiB).
const MAX_METRICS_BYTES: usize = 8 * 1024 * 1024;
/// How often the cluster list is re-read when nothing is due sooner.
const RECHECK: Duration = Duration::from_secs(1);
/// A model server is scraped at most once a second (validation refuses a
/// shorter `metrics_interval`; this holds whatever config got through).
pub(crate) const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// A cluster's load, over the endpoints whose last scrape succeeded:
/// requests running and waiting summed, the KV-cache ratio the largest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct UpstreamLoad {
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    pub kv_cache_usage: Option<f64>,
    pub endpoints_up: usize,
}

#[derive(Clone, Debug, Serialize)]
struct EndpointState {
    up: bool,
    #[serde(flatten)]
    load: EndpointLoad,
    scraped_at_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// The address scraped, the key the data plane looks readings up by.
    #[serde(skip)]
    addr: SocketAddr,
}

pub struct UpstreamScraper {
    families: Families,
    /// cluster → endpoint → its last scrape. Control plane only.
    latest: Mutex<BTreeMap<String, BTreeMap<String, EndpointState>>>,
    /// The KV-cache ratios of the endpoints up, published after each round.
    readings: Arc<KvCacheReadings>,
}

/// One endpoint to scrape.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Target {
    cluster: String,
    /// The `endpoint` label: `ip:port`, or `host:port` as configured.
    endpoint: String,
    addr: SocketAddr,
    uri: Uri,
    host: Option<HeaderValue>,
}

/// The clusters to scrape, and those skipped for their TLS.
#[derive(Debug, Default)]
struct Plan {
    clusters: Vec<(String, Duration, Vec<Target>)>,
    skipped_tls: Vec<String>,
}

impl UpstreamScraper {
    /// Registers the `sluice_upstream_*` families in `registry`; its KV
    /// readings are published to a table of its own.
    pub fn new(registry: &Registry) -> Result<Arc<UpstreamScraper>, prometheus::Error> {
        UpstreamScraper::publishing(registry, Arc::default())
    }

    /// As [`UpstreamScraper::new`], publishing the KV readings to `readings`
    /// (the one the data plane reads, in [`crate::Shared`]).
    pub fn publishing(
        registry: &Registry,
        readings: Arc<KvCacheReadings>,
    ) -> Result<Arc<UpstreamScraper>, prometheus::Error> {
        Ok(Arc::new(UpstreamScraper {
            families: Families::new(registry)?,
            latest: Mutex::new(BTreeMap::new()),
            readings,
        }))
    }

    /// The table the KV readings are published to.
    pub fn readings(&self) -> &Arc<KvCacheReadings> {
        &self.readings
    }

    /// The latest load of `cluster`; `None` when it is not scraped or no
    /// endpoint of it answered its last scrape.
    pub fn latest(&self, cluster: &str) -> Option<UpstreamLoad> {
        let latest = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        load_of(latest.get(cluster)?)
    }

    /// The body of `GET /v1/upstreams`: every scraped cluster with its
    /// load and each endpoint's last scrape.
    pub fn snapshot(&self) -> Value {
        let latest = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        let clusters: Vec<Value> = latest
            .iter()
            .map(|(cluster, endpoints)| {
                let each: Vec<Value> = endpoints
                    .iter()
                    .map(|(endpoint, state)| {
                        let mut v = serde_json::to_value(state).unwrap_or(Value::Null);
                        if let Value::Object(map) = &mut v {
                            map.insert("endpoint".into(), Value::String(endpoint.clone()));
                        }
                        v
                    })
                    .collect();
                serde_json::json!({
                    "cluster": cluster,
                    "load": load_of(endpoints),
                    "endpoints": each,
                })
            })
            .collect();
        serde_json::json!({ "clusters": clusters })
    }

    /// Scrapes until `cancel`.
    pub async fn run(self: Arc<Self>, store: Arc<SnapshotStore>, cancel: CancellationToken) {
        let client = client();
        let mut last: HashMap<String, Instant> = HashMap::new();
        let mut told_tls = HashSet::new();
        loop {
            let plan = plan(&store.load().config);
            for name in &plan.skipped_tls {
                if told_tls.insert(name.clone()) {
                    info!(cluster = %name, "upstream metrics not scraped: cluster uses TLS");
                }
            }
            self.forget_others(&plan);
            last.retain(|name, _| plan.clusters.iter().any(|(c, _, _)| c == name));

            let now = Instant::now();
            let mut scrapes = JoinSet::new();
            for (cluster, interval, targets) in &plan.clusters {
                if last.get(cluster).is_some_and(|t| now < *t + *interval) {
                    continue;
                }
                last.insert(cluster.clone(), now);
                for target in targets {
                    let (client, target) = (client.clone(), target.clone());
                    scrapes.spawn(async move {
                        let result = scrape(&client, &target).await;
                        (target, result)
                    });
                }
            }
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    joined = scrapes.join_next() => match joined {
                        Some(Ok((target, result))) => self.record(&target, result),
                        Some(Err(e)) => debug!(error = %e, "upstream scrape task failed"),
                        None => break,
                    },
                }
            }
            self.publish();

            let next_due = plan
                .clusters
                .iter()
                .filter_map(|(c, interval, _)| last.get(c).map(|t| *t + *interval))
                .min();
            let recheck = Instant::now() + RECHECK;
            let wake = next_due.map_or(recheck, |due| due.min(recheck));
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    fn record(&self, target: &Target, result: Result<EndpointLoad, String>) {
        let labels = [target.cluster.as_str(), target.endpoint.as_str()];
        let mut latest = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        let endpoints = latest.entry(target.cluster.clone()).or_default();
        let was_up = endpoints.get(&target.endpoint).is_none_or(|s| s.up);
        let state = match result {
            Ok(load) => {
                if !was_up {
                    info!(cluster = %target.cluster, endpoint = %target.endpoint, "upstream metrics scrape recovered");
                }
                self.families.up.with_label_values(&labels).set(1);
                // Shown at 0 from the first scrape on, not from the first error.
                let _ = self.families.errors.with_label_values(&labels);
                self.families.set_load(&labels, Some(&load));
                EndpointState {
                    up: true,
                    load,
                    scraped_at_ms: now_ms(),
                    error: None,
                    addr: target.addr,
                }
            }
            Err(error) => {
                if was_up {
                    warn!(cluster = %target.cluster, endpoint = %target.endpoint, %error, "upstream metrics scrape failed");
                } else {
                    debug!(cluster = %target.cluster, endpoint = %target.endpoint, %error, "upstream metrics scrape failed");
                }
                self.families.up.with_label_values(&labels).set(0);
                self.families.errors.with_label_values(&labels).inc();
                self.families.set_load(&labels, None);
                EndpointState {
                    up: false,
                    load: EndpointLoad::default(),
                    scraped_at_ms: now_ms(),
                    error: Some(error),
                    addr: target.addr,
                }
            }
        };
        endpoints.insert(target.endpoint.clone(), state);
    }

    /// Hands the data plane the KV-cache ratio of every endpoint whose last
    /// scrape succeeded and served one.
    fn publish(&self) {
        let latest = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        let table = latest
            .iter()
            .map(|(cluster, endpoints)| {
                let ratios = endpoints
                    .values()
                    .filter(|s| s.up)
                    .filter_map(|s| Some((s.addr, s.load.kv_cache_usage?)))
                    .collect();
                (cluster.clone(), ratios)
            })
            .collect();
        drop(latest);
        self.readings.publish(table);
    }

    /// Drops the series and memory of endpoints no longer scraped.
    fn forget_others(&self, plan: &Plan) {
        let mut latest = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        latest.retain(|cluster, endpoints| {
            let targets = plan
                .clusters
                .iter()
                .find(|(c, _, _)| c == cluster)
                .map(|(_, _, t)| t.as_slice())
                .unwrap_or_default();
            endpoints.retain(|endpoint, _| {
                let kept = targets.iter().any(|t| &t.endpoint == endpoint);
                if !kept {
                    self.families.remove(&[cluster.as_str(), endpoint.as_str()]);
                }
                kept
            });
            !targets.is_empty()
        });
    }
}

/// Running and waiting summed over the endpoints that are up; the
/// KV-cache ratio is the largest, since ratios of different caches do not add.
fn load_of(endpoints: &BTreeMap<String, EndpointState>) -> Option<UpstreamLoad> {
    let mut load = UpstreamLoad::default();
    for state in endpoints.values().filter(|s| s.up) {
        load.endpoints_up += 1;
        load.running = sum(load.running, state.load.running);
        load.waiting = sum(load.waiting, state.load.waiting);
        load.kv_cache_usage = match (load.kv_cache_usage, state.load.kv_cache_usage) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
    (load.endpoints_up > 0).then_some(load)
}

fn sum(total: Option<f64>, value: Option<f64>) -> Option<f64> {
    match (total, value) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

/// What to scrape under `config`.
fn plan(config: &Config) -> Plan {
    let mut plan = Plan::default();
    for c in &config.clusters {
        let Some(path) = c.metrics_path.as_deref() else {
            continue;
        };
        if c.kind != ClusterKind::Llm {
            continue;
        }
        if c.tls.is_some() {
            plan.skipped_tls.push(c.name.clone());
            continue;
        }
        let targets = c
            .endpoints
            .iter()
            .filter_map(|e| target(&c.name, e, path))
            .collect();
        let interval = c.metrics_interval.max(MIN_INTERVAL);
        plan.clusters.push((c.name.clone(), interval, targets));
    }
    plan
}

fn target(cluster: &str, e: &Endpoint, path: &str) -> Option<Target> {
    let named = e.host.parse::<IpAddr>().is_err();
    let endpoint = match named {
        true => format!("{}:{}", e.host, e.addr.port()),
        false => e.addr.to_string(),
    };
    let uri = format!("http://{}{path}", e.addr).parse().ok()?;
    let host = match named {
        true => HeaderValue::from_str(&endpoint).ok(),
        false => None,
    };
    Some(Target {
        cluster: cluster.to_string(),
        endpoint,
        addr: e.addr,
        uri,
        host,
    })
}

fn client() -> HttpClient {
    HttpClient::new(SCRAPE_TIMEOUT, MAX_METRICS_BYTES)
}

async fn scrape(client: &HttpClient, target: &Target) -> Result<EndpointLoad, String> {
    let mut req = Request::get(target.uri.clone())
        .header(USER_AGENT, "sluice")
        // The classic text format: older servers answer nothing else.
        .header(ACCEPT, "text/plain;version=0.0.4")
        .body(Full::default())
        .map_err(|e| e.to_string())?;
    if let Some(host) = &target.host {
        req.headers_mut().insert(HOST, host.clone());
    }
    let answer = client.send(req).await?;
    if answer.status != StatusCode::OK {
        return Err(format!("answered {}", answer.status));
    }
    Ok(parse::endpoint_load(&String::from_utf8_lossy(&answer.body)))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests;
