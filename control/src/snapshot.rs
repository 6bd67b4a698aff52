//! The immutable view of the config the data plane reads: routes with their
//! pick tables and metric handles resolved, clusters with their endpoint
//! state. Built whole on every change; never mutated after.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use sluice_filters::{
    hash_bytes, Breakers, CostMeter, EndpointSet, Matcher, Metrics, ModelHandleCache, RequestView,
    RouteClusterMetrics, StickyTable, WeightedTable,
};

use crate::config::{ClusterConfig, Config, ListenerProtocol};
use crate::fault::FaultRuntime;
use crate::limits::RouteLimits;
use crate::mirror::MirrorRuntime;
use crate::shedding::RouteShedding;
use crate::stats::{Stats, StatsKey};

/// A cluster as the data plane sees it.
#[derive(Debug)]
pub struct ClusterRuntime {
    pub config: ClusterConfig,
    /// Round-robin position and ejections. Shared with the previous snapshot
    /// when the endpoints did not change, so a swap forgets no ejection.
    pub endpoints: Arc<EndpointSet>,
    /// Requests in flight, waiting for a connection, and upstream
    /// connections open, under the cluster's `circuit_breakers`. Shared
    /// with the previous snapshot's cluster of the same name: requests
    /// still running on it and connections still open to it count.
    pub breakers: Arc<Breakers>,
    /// The data plane's own state for this cluster, made on first use (the
    /// proxy keeps its upstream connector here): opaque to the control
    /// plane, which never imports pingora.
    pub data_plane: OnceLock<Arc<dyn Any + Send + Sync>>,
    /// The cluster version's lineage id (see `lineage`), resolved here so
    /// that the answer headers, spans and trace lines name it per request
    /// without hashing.
    pub lineage_id: sluice_filters::ContentId,
}

/// One cluster of a route's split.
#[derive(Clone)]
pub struct RouteTarget {
    /// Index into [`Snapshot::clusters`].
    pub cluster: usize,
    pub weight: u32,
    pub metrics: RouteClusterMetrics,
    /// GenAI metric handles by model, for answers the token meter reads.
    pub genai: Arc<ModelHandleCache>,
    /// `sluice_cost_usd_total` by the cluster's per-token prices.
    pub cost: CostMeter,
    pub stats: StatsKey,
    /// `rewrite.<cluster>.model`: the model requests sent here carry.
    pub rewrite_model: Option<Arc<str>>,
}

pub struct RouteRuntime {
    pub name: String,
    pub matcher: Matcher,
    pub targets: Vec<RouteTarget>,
    pub table: WeightedTable,
    /// Lower-case session header, and the rendezvous table over `targets`.
    pub sticky: Option<(String, StickyTable)>,
    /// Handles for failures before a cluster is chosen (cluster label "").
    pub unrouted: RouteClusterMetrics,
    /// With `allow_version_header`: the target an `x-sluice-version` value
    /// forces — `stable` / `canary` (from the route's rollout) or a cluster's
    /// `version`. Empty when the route does not allow it.
    pub versions: Vec<(String, usize)>,
    /// Shadow traffic policy, when the route mirrors.
    pub mirror: Option<Arc<MirrorRuntime>>,
    /// Rate limit budgets, when the route has `limits`.
    pub limits: Option<Arc<RouteLimits>>,
    /// `max_body`: the longest request body, in bytes.
    pub max_body: u64,
    /// The shedding level, when the route has `shedding`.
    pub shedding: Option<Arc<RouteShedding>>,
}

impl RouteRuntime {
    /// The target for one request: the version a tester forced (where the
    /// route allows it), else the session's sticky cluster, else a weighted
    /// pick from `random`. `None` when every weight is 0.
    pub fn pick_target(&self, req: &impl RequestView, random: u64) -> Option<usize> {
        if let Some(t) = req
            .header("x-sluice-version")
            .and_then(|v| self.forced_target(v))
        {
            return Some(t);
        }
        match &self.sticky {
            Some((header, table)) => match req.header(header) {
                Some(key) => table.pick(hash_bytes(key)),
                None => self.table.pick(random),
            },
            None => self.table.pick(random),
        }
    }

    /// The target an `x-sluice-version` header value names, if any.
    pub fn forced_target(&self, value: &[u8]) -> Option<usize> {
        self.versions
            .iter()
            .find(|(name, _)| name.as_bytes() == value)
            .map(|(_, t)| *t)
    }
}

pub struct Snapshot {
    /// Rises by one with every applied change.
    pub version: u64,
    /// Hex digest of the config as written.
    pub hash: String,
    pub config: Arc<Config>,
    pub clusters: Vec<Arc<ClusterRuntime>>,
    pub routes: Vec<RouteRuntime>,
    /// Per listener (config order): the indices of its routes, in order.
    pub listener_routes: Vec<Vec<usize>>,
    /// Per listener: handles for requests no route matched.
    pub no_route: Vec<RouteClusterMetrics>,
    /// Per listener: whether one of its routes matches on the model, so the
    /// model must be read before the route is chosen.
    pub routes_by_model: Vec<bool>,
    /// Fault experiments in config order, their state carried over from
    /// the previous snapshot while unchanged.
    pub faults: Vec<Arc<FaultRuntime>>,
    /// Per route (config order): the indices into `faults` of the
    /// experiments that can match its requests (theirs and those of no
    /// route), rising. A request walks these, not every experiment.
    pub route_faults: Vec<Vec<usize>>,
    /// The experiments of no route: all a request that matched no route can meet.
    pub unrouted_faults: Vec<usize>,
}

impl Snapshot {
    /// Builds a snapshot. `previous` lends its endpoint state to clusters
    /// whose endpoints are unchanged.
    pub fn build(
        config: Arc<Config>,
        version: u64,
        previous: Option<&Snapshot>,
        metrics: &Metrics,
        stats: &Stats,
    ) -> Snapshot {
        let reuse: HashMap<&str, &Arc<ClusterRuntime>> = previous
            .map(|p| {
                p.clusters
                    .iter()
                    .map(|c| (c.config.name.as_str(), c))
                    .collect()
            })
            .unwrap_or_default();
        let clusters: Vec<Arc<ClusterRuntime>> = config
            .clusters
            .iter()
            .map(|c| {
                let endpoints = match reuse.get(c.name.as_str()) {
                    Some(old) if old.config.endpoints == c.endpoints => old.endpoints.clone(),
                    _ => Arc::new(EndpointSet::new(c.endpoints.len())),
                };
                let breakers = reuse
                    .get(c.name.as_str())
                    .map_or_else(Arc::default, |old| old.breakers.clone());
                Arc::new(ClusterRuntime {
                    data_plane: OnceLock::new(),
                    config: c.clone(),
                    endpoints,
                    breakers,
                    lineage_id: crate::lineage::cluster_id(c),
                })
            })
            .collect();
        let cluster_index: HashMap<&str, usize> = clusters
            .iter()
            .enumerate()
            .map(|(i, c)| (c.config.name.as_str(), i))
            .collect();

        let routes: Vec<RouteRuntime> = config
            .routes
            .iter()
            .map(|r| {
                let targets: Vec<RouteTarget> = r
                    .split
                    .iter()
                    .filter_map(|(name, weight)| {
                        let i = *cluster_index.get(name.as_str())?;
                        let c = &clusters[i].config;
                        Some(RouteTarget {
                            cluster: i,
                            weight: *weight,
                            metrics: metrics.route_cluster(&r.name, name, &c.version),
                            genai: Arc::new(metrics.genai.cache(&r.name, name, &c.version)),
                            cost: metrics
                                .cost
                                .meter(&r.name, name, &c.version, c.cost.as_ref()),
                            stats: stats.key(&r.name, name, &c.version),
                            rewrite_model: r.rewrite_model.get(name).map(|m| Arc::from(m.as_str())),
                        })
                    })
                    .collect();
                let weights: Vec<u32> = targets.iter().map(|t| t.weight).collect();
                let sticky = r.sticky.as_ref().map(|s| {
                    let pairs: Vec<(u64, u32)> = targets
                        .iter()
                        .map(|t| {
                            (
                                hash_bytes(clusters[t.cluster].config.name.as_bytes()),
                                t.weight,
                            )
                        })
                        .collect();
                    (s.header.clone(), StickyTable::new(&pairs))
                });
                let versions = if r.allow_version_header {
                    version_names(&config, &r.name, &targets, &clusters)
                } else {
                    Vec::new()
                };
                let mirror = r.mirror.as_ref().and_then(|m| {
                    let shadow = clusters.get(*cluster_index.get(m.cluster.as_str())?)?;
                    let embedder = m.compare.embeddings.as_ref().and_then(|e| {
                        clusters
                            .get(*cluster_index.get(e.cluster.as_str())?)
                            .cloned()
                    });
                    let old = previous
                        .and_then(|p| p.route(&r.name))
                        .and_then(|old| old.mirror.as_deref());
                    Some(Arc::new(MirrorRuntime::build(
                        &r.name,
                        m,
                        (shadow.clone(), embedder),
                        old,
                        version,
                        metrics,
                    )))
                });
                // Budgets carry over a swap while the route's limits are unchanged.
                let limits = r.limits.as_ref().map(|l| {
                    previous
                        .and_then(|p| p.route(&r.name))
                        .and_then(|old| old.limits.clone())
                        .filter(|old| old.config == *l)
                        .unwrap_or_else(|| Arc::new(RouteLimits::new(&r.name, l.clone(), metrics)))
                });
                // The level carries over a swap while the route's rule is unchanged.
                let shedding = r.shedding.as_ref().map(|s| {
                    previous
                        .and_then(|p| p.route(&r.name))
                        .and_then(|old| old.shedding.clone())
                        .filter(|old| old.config == *s)
                        .unwrap_or_else(|| {
                            Arc::new(RouteShedding::new(&r.name, s.clone(), metrics))
                        })
                });
                RouteRuntime {
                    limits,
                    max_body: r.max_body,
                    shedding,
                    mirror,
                    versions,
                    name: r.name.clone(),
                    matcher: r.matcher.clone(),
                    table: WeightedTable::new(&weights),
                    targets,
                    sticky,
                    unrouted: metrics.route_cluster(&r.name, "", ""),
                }
            })
            .collect();

        let listener_routes: Vec<Vec<usize>> = config
            .listeners
            .iter()
            .map(|l| {
                if matches!(l.protocol, ListenerProtocol::Tcp { .. }) {
                    return Vec::new();
                }
                config
                    .routes
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.listener == l.name)
                    .map(|(i, _)| i)
                    .collect()
            })
            .collect();
        let no_route = config
            .listeners
            .iter()
            .map(|_| metrics.route_cluster("", "", ""))
            .collect();
        let faults = fault_runtimes(&config, &routes, previous, metrics);
        let routes_by_model = listener_routes
            .iter()
            .map(|rs| rs.iter().any(|i| routes[*i].matcher.model.is_some()))
            .collect();
        let unrouted_faults: Vec<usize> = (0..faults.len())
            .filter(|&i| faults[i].experiment.matcher.route.is_none())
            .collect();
        let route_faults = routes
            .iter()
            .map(|r| {
                (0..faults.len())
                    .filter(|&i| {
                        faults[i]
                            .experiment
                            .matcher
                            .route
                            .as_deref()
                            .is_none_or(|x| x == r.name)
                    })
                    .collect()
            })
            .collect();
        Snapshot {
            routes_by_model,
            faults,
            route_faults,
            unrouted_faults,
            version,
            hash: format!("{:016x}", hash_bytes(config.raw.to_yaml().as_bytes())),
            config,
            clusters,
            routes,
            listener_routes,
            no_route,
        }
    }

    /// The first of the listener's routes (in config order) that matches.
    pub fn match_route(&self, listener: usize, req: &impl RequestView) -> Option<usize> {
        self.match_route_with_model(listener, req, None)
    }

    /// [`Snapshot::match_route`] for a request that names `model`.
    pub fn match_route_with_model(
        &self,
        listener: usize,
        req: &impl RequestView,
        model: Option<&str>,
    ) -> Option<usize> {
        self.listener_routes
            .get(listener)?
            .iter()
            .copied()
            .find(|i| self.routes[*i].matcher.matches_with_model(req, model))
    }

    /// The experiments a request on `route` (an index into `routes`; `None`
    /// when it matched none) can meet, in config order.
    pub fn faults_for(&self, route: Option<usize>) -> impl Iterator<Item = &Arc<FaultRuntime>> {
        let indices = match route.and_then(|r| self.route_faults.get(r)) {
            Some(of_route) => of_route,
            None => &self.unrouted_faults,
        };
        indices.iter().filter_map(|&i| self.faults.get(i))
    }

    pub fn listener_index(&self, name: &str) -> Option<usize> {
        self.config.listeners.iter().position(|l| l.name == name)
    }

    pub fn route(&self, name: &str) -> Option<&RouteRuntime> {
        self.routes.iter().find(|r| r.name == name)
    }
}

/// The experiments' live state: an unchanged experiment keeps its clock and
/// counts; one that left the config (or changed) is told to stop.
fn fault_runtimes(
    config: &Config,
    routes: &[RouteRuntime],
    previous: Option<&Snapshot>,
    metrics: &Metrics,
) -> Vec<Arc<FaultRuntime>> {
    let old = previous.map_or(&[][..], |p| &p.faults[..]);
    let by_id: HashMap<&str, &Arc<FaultRuntime>> =
        old.iter().map(|f| (f.experiment.id.as_str(), f)).collect();
    let faults: Vec<Arc<FaultRuntime>> = config
        .faults
        .iter()
        .map(
            |e| match by_id.get(e.id.as_str()).filter(|f| f.experiment == *e) {
                Some(f) => (*f).clone(),
                None => {
                    let halt_keys = e
                        .matcher
                        .route
                        .as_deref()
                        .and_then(|r| routes.iter().find(|x| x.name == r))
                        .map(|r| r.targets.iter().map(|t| t.stats).collect())
                        .unwrap_or_default();
                    Arc::new(FaultRuntime::new(e.clone(), metrics, halt_keys))
                }
            },
        )
        .collect();
    let kept: std::collections::HashSet<*const FaultRuntime> =
        faults.iter().map(Arc::as_ptr).collect();
    for f in old {
        if !kept.contains(&Arc::as_ptr(f)) {
            f.mark_removed();
            // Its counter series goes too, unless a new experiment took the
            // same id and kind (it counts on in the same series): under
            // experiments that come and go, the series would grow forever.
            let (id, kind) = (f.experiment.id.as_str(), f.experiment.action.name());
            let reused = faults
                .iter()
                .any(|n| n.experiment.id == id && n.experiment.action.name() == kind);
            if !reused {
                let _ = metrics.faults.injected.remove_label_values(&[id, kind]);
            }
        }
    }
    faults
}

/// The names a tester may put in `x-sluice-version` for a route: `stable` and
/// `canary` when a rollout runs on it, and each cluster's `version` label.
fn version_names(
    config: &Config,
    route: &str,
    targets: &[RouteTarget],
    clusters: &[Arc<ClusterRuntime>],
) -> Vec<(String, usize)> {
    let target_of = |cluster: &str| {
        targets
            .iter()
            .position(|t| clusters[t.cluster].config.name == cluster)
    };
    let mut names = Vec::new();
    if let Some(rollout) = config.rollouts.iter().find(|r| r.route == route) {
        names.extend(target_of(&rollout.stable).map(|t| ("stable".to_string(), t)));
        names.extend(target_of(&rollout.canary).map(|t| ("canary".to_string(), t)));
    }
    for (i, t) in targets.iter().enumerate() {
        let version = &clusters[t.cluster].config.version;
        if !version.is_empty() && !names.iter().any(|(n, _)| n == version) {
            names.push((version.clone(), i));
        }
    }
    names
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("version", &self.version)
            .field("hash", &self.hash)
            .field("routes", &self.routes.len())
            .field("clusters", &self.clusters.len())
            .finish()
    }
}

#[cfg(test)]
mod tests;
