//! Second stage: checks every value and reference of a [`RawConfig`] and
//! builds the typed [`Config`], or returns every error found.

mod admin;
mod breakers;
mod errors;
mod fault;
mod feedback;
mod limits;
mod load;
mod mirror;
mod outlier;
mod plan;
mod recorder;
mod rollout;
mod routes;
mod shedding;
mod telemetry;

use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use sluice_filters::{ModelLineage, Price, RawPrice, VersionedUri};

use super::raw::{
    RawCluster, RawClusterKind, RawLineage, RawListener, RawProtocol, RawTimeouts,
    RawUpstreamProtocol, RawUpstreamTls,
};
use super::typed::*;
use super::{ConfigErrors, RawConfig};
use errors::Errors;

const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// One fixed path, so that the new process and the old agree without being
/// told each other's pid; two sluices on one host set their own.
const DEFAULT_UPGRADE_SOCK: &str = "/tmp/sluice_upgrade.sock";
const MAX_UNIX_PATH: usize = 107;
const DEFAULT_MAX_EXPERIMENTS: usize = 1000;
pub(crate) use admin::DEFAULT_ADMIN_MAX_BODY;
pub use fault::RUNTIME_LISTENER_PREFIX;

impl RawConfig {
    pub fn validate(&self) -> Result<Config, ConfigErrors> {
        let mut errs = Errors::default();
        let runtime = runtime(self, &mut errs);
        let admin = admin::admin(self, runtime.max_fault_ttl, &mut errs);
        let clusters = clusters(&self.clusters, &mut errs);
        let listeners = listeners(&self.listeners, &clusters, &admin, &mut errs);
        let routes = routes::routes(&self.routes, &self.listeners, &clusters, &mut errs);
        let plans = plan::rules(self.plans.as_ref(), &mut errs);
        let rollouts = rollout::rollouts(&self.rollouts, &routes, &clusters, &plans, &mut errs);
        let known = fault::Known {
            listeners: &self.listeners,
            routes: &routes,
            clusters: &clusters,
            max_ttl: runtime.max_fault_ttl,
        };
        let faults = fault::faults(&self.faults, &known, &mut errs);
        let telemetry = telemetry::telemetry(self, &mut errs);
        let gpu = telemetry::gpu(self, &mut errs);
        let recorder = self
            .recorder
            .as_ref()
            .map(|r| recorder::recorder(r, "recorder", &routes, &mut errs));
        let load = load::load(self.load.as_ref(), &mut errs);
        let feedback = feedback::feedback(self.feedback.as_ref(), &mut errs);
        if !errs.0.is_empty() {
            return Err(ConfigErrors(errs.0));
        }
        Ok(Config {
            raw: self.clone(),
            runtime,
            admin,
            listeners,
            clusters,
            routes,
            rollouts,
            faults,
            telemetry,
            gpu,
            recorder,
            load,
            plans,
            feedback,
        })
    }
}

fn runtime(raw: &RawConfig, errs: &mut Errors) -> RuntimeConfig {
    let r = raw.runtime.clone().unwrap_or_default();
    let threads = match r.threads {
        Some(0) => {
            errs.push("runtime.threads", "must be at least 1");
            1
        }
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let grace_period = errs.duration(
        "runtime.grace_period".into(),
        r.grace_period.as_deref(),
        DEFAULT_GRACE,
    );
    let max_fault_ttl = errs.duration(
        "runtime.max_fault_ttl".into(),
        r.max_fault_ttl.as_deref(),
        fault::DEFAULT_MAX_FAULT_TTL,
    );
    let max_experiments = match r.max_experiments {
        Some(0) => {
            errs.push("runtime.max_experiments", "must be at least 1");
            DEFAULT_MAX_EXPERIMENTS
        }
        Some(n) => n,
        None => DEFAULT_MAX_EXPERIMENTS,
    };
    if raw.faults.len() > max_experiments {
        errs.push(
            "faults",
            format!(
                "{} experiments, over runtime.max_experiments ({max_experiments})",
                raw.faults.len()
            ),
        );
    }
    let state_dir = match r.state_dir.as_deref() {
        Some("") => {
            errs.push("runtime.state_dir", "must not be empty");
            None
        }
        Some(dir) => Some(PathBuf::from(dir)),
        None => None,
    };
    let upgrade_sock = upgrade_sock(r.upgrade_sock.as_deref(), errs);
    RuntimeConfig {
        threads,
        grace_period,
        max_fault_ttl,
        mirror_priority: r.mirror_priority.unwrap_or_default(),
        max_experiments,
        state_dir,
        upgrade_sock,
    }
}

/// A Unix socket path fits `sockaddr_un` (107 bytes and a NUL).
fn upgrade_sock(raw: Option<&str>, errs: &mut Errors) -> PathBuf {
    match raw {
        None => PathBuf::from(DEFAULT_UPGRADE_SOCK),
        Some("") => {
            errs.push("runtime.upgrade_sock", "must not be empty");
            PathBuf::from(DEFAULT_UPGRADE_SOCK)
        }
        Some(path) if path.len() > MAX_UNIX_PATH => {
            errs.push(
                "runtime.upgrade_sock",
                format!(
                    "{} bytes, over the {MAX_UNIX_PATH} a Unix socket path may have",
                    path.len()
                ),
            );
            PathBuf::from(DEFAULT_UPGRADE_SOCK)
        }
        Some(path) => PathBuf::from(path),
    }
}

fn clusters(raw: &[RawCluster], errs: &mut Errors) -> Vec<ClusterConfig> {
    let mut seen = HashMap::new();
    raw.iter()
        .enumerate()
        .map(|(i, c)| {
            let at = format!("clusters[{i}]");
            errs.item_name(&mut seen, &at, "cluster", &c.name);
            if c.endpoints.is_empty() {
                errs.push(
                    format!("{at}.endpoints"),
                    "at least one endpoint is required",
                );
            }
            let endpoints = c
                .endpoints
                .iter()
                .enumerate()
                .filter_map(|(j, e)| endpoint(format!("{at}.endpoints[{j}]"), e, errs))
                .collect();
            ClusterConfig {
                name: c.name.clone(),
                kind: match c.kind {
                    RawClusterKind::Llm => ClusterKind::Llm,
                    RawClusterKind::Vector => ClusterKind::Vector,
                    RawClusterKind::Cache => ClusterKind::Cache,
                    RawClusterKind::Http => ClusterKind::Http,
                },
                version: c.version.clone().unwrap_or_default(),
                endpoints,
                tls: c.tls.as_ref().map(upstream_tls),
                protocol: protocol(&at, c, errs),
                timeouts: timeouts(&at, c.timeouts.as_ref(), errs),
                metrics_path: metrics_path(&at, c, errs),
                metrics_interval: metrics_interval(&at, c, errs),
                cost: c.cost.as_ref().and_then(|p| price(&at, p, errs)),
                outlier_detection: c
                    .outlier_detection
                    .as_ref()
                    .and_then(|o| outlier::policy(&at, c, o, errs)),
                circuit_breakers: breakers::limits(&at, c, errs),
                retry_budget: breakers::retry_budget(&at, c, errs),
                lineage: lineage(&at, c.lineage.as_ref(), errs),
            }
        })
        .collect()
}

/// `lineage:`: each of dataset, checkpoint and prompt template as
/// `uri@version`; the API version as written.
fn lineage(at: &str, raw: Option<&RawLineage>, errs: &mut Errors) -> ModelLineage {
    let Some(raw) = raw else {
        return ModelLineage::default();
    };
    let mut uri = |key: &str, text: &Option<String>| {
        let text = text.as_deref()?;
        text.parse::<VersionedUri>()
            .map_err(|e| errs.push(format!("{at}.lineage.{key}"), e))
            .ok()
    };
    ModelLineage {
        dataset: uri("dataset", &raw.dataset),
        checkpoint: uri("checkpoint", &raw.checkpoint),
        prompt_template: uri("prompt_template", &raw.prompt_template),
        api_version: raw.api_version.clone(),
    }
}

/// `cost:`, checked by the table's own rules (the ones `sluice capacity`
/// applies to a scenario's), its errors under the cluster's path.
fn price(at: &str, raw: &RawPrice, errs: &mut Errors) -> Option<Price> {
    match raw.validate(&format!("{at}.cost")) {
        Ok(price) => Some(price),
        Err(e) => {
            for e in e.0 {
                errs.push(e.path, e.message);
            }
            None
        }
    }
}

fn endpoint(path: String, text: &str, errs: &mut Errors) -> Option<Endpoint> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Some(Endpoint {
            host: addr.ip().to_string(),
            addr,
        });
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        errs.push(path, format!("`{text}` is not host:port"));
        return None;
    };
    if host.is_empty() || port.parse::<u16>().is_err() {
        errs.push(path, format!("`{text}` is not host:port"));
        return None;
    }
    match text.to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(addr)) => Some(Endpoint {
            host: host.to_string(),
            addr,
        }),
        _ => {
            errs.push(path, format!("cannot resolve `{host}`"));
            None
        }
    }
}

/// At least 1 s: a model server is scraped at most once a second, and
/// what its KV-cache ratio says per request is never fresher than that.
fn metrics_interval(at: &str, c: &RawCluster, errs: &mut Errors) -> Duration {
    let path = format!("{at}.metrics_interval");
    let interval = errs.duration(
        path.clone(),
        c.metrics_interval.as_deref(),
        Duration::from_secs(5),
    );
    if interval < Duration::from_secs(1) {
        errs.push(
            path,
            format!(
                "must be at least 1s (a model server is scraped at most once a second), found {}",
                sluice_filters::format_duration(interval)
            ),
        );
    }
    interval
}

fn metrics_path(at: &str, c: &RawCluster, errs: &mut Errors) -> Option<String> {
    let path = c.metrics_path.as_ref()?;
    if !path.starts_with('/') {
        errs.push(
            format!("{at}.metrics_path"),
            format!("`{path}` must start with `/`"),
        );
    }
    if c.kind != RawClusterKind::Llm {
        errs.push(format!("{at}.metrics_path"), "only allowed on kind llm");
    }
    Some(path.clone())
}

fn protocol(at: &str, c: &RawCluster, errs: &mut Errors) -> UpstreamProtocol {
    let tls = c.tls.is_some();
    match c.protocol {
        None | Some(RawUpstreamProtocol::Http1) => UpstreamProtocol::Http1,
        Some(RawUpstreamProtocol::Auto) => UpstreamProtocol::Auto,
        Some(RawUpstreamProtocol::H2c) => {
            if tls {
                errs.push(
                    format!("{at}.protocol"),
                    "h2c is HTTP/2 without TLS but the cluster has `tls`: use `h2`",
                );
            }
            UpstreamProtocol::H2c
        }
        Some(RawUpstreamProtocol::H2) => {
            if !tls {
                errs.push(
                    format!("{at}.protocol"),
                    "h2 is HTTP/2 over TLS but the cluster has no `tls`: use `h2c`",
                );
            }
            UpstreamProtocol::H2
        }
    }
}

fn upstream_tls(raw: &RawUpstreamTls) -> UpstreamTls {
    UpstreamTls {
        sni: raw.sni.clone(),
        verify: raw.verify.unwrap_or(true),
        ca: raw.ca.as_ref().map(PathBuf::from),
    }
}

fn timeouts(at: &str, raw: Option<&RawTimeouts>, errs: &mut Errors) -> Timeouts {
    let d = Timeouts::default();
    let Some(t) = raw else { return d };
    Timeouts {
        connect: errs.duration(
            format!("{at}.timeouts.connect"),
            t.connect.as_deref(),
            d.connect,
        ),
        first_byte: errs.duration(
            format!("{at}.timeouts.first_byte"),
            t.first_byte.as_deref(),
            d.first_byte,
        ),
        idle: errs.duration(format!("{at}.timeouts.idle"), t.idle.as_deref(), d.idle),
    }
}

fn listeners(
    raw: &[RawListener],
    clusters: &[ClusterConfig],
    admin: &AdminConfig,
    errs: &mut Errors,
) -> Vec<ListenerConfig> {
    let mut seen = HashMap::new();
    let mut addrs: HashMap<SocketAddr, String> = HashMap::new();
    // Port 0 is a fresh port for each socket: several may ask for it.
    if admin.listen.port() != 0 {
        addrs.insert(admin.listen, "admin.listen".into());
    }
    let mut out = Vec::new();
    for (i, l) in raw.iter().enumerate() {
        let at = format!("listeners[{i}]");
        errs.item_name(&mut seen, &at, "listener", &l.name);
        let listen = errs.socket_addr(format!("{at}.listen"), &l.listen);
        if let Some(addr) = listen.filter(|a| a.port() != 0) {
            if let Some(first) = addrs.get(&addr) {
                errs.push(
                    format!("{at}.listen"),
                    format!("{addr} is already used by {first}"),
                );
            } else {
                addrs.insert(addr, format!("{at}.listen"));
            }
        }
        let protocol = listener_protocol(&at, l, clusters, errs);
        let limits = limits::limits(&at, l.limits.as_ref(), errs);
        if let (Some(listen), Some(protocol)) = (listen, protocol) {
            out.push(ListenerConfig {
                name: l.name.clone(),
                listen,
                protocol,
                limits,
            });
        }
    }
    out
}

fn listener_protocol(
    at: &str,
    l: &RawListener,
    clusters: &[ClusterConfig],
    errs: &mut Errors,
) -> Option<ListenerProtocol> {
    let name = match l.protocol {
        RawProtocol::Http => "http",
        RawProtocol::Https => "https",
        RawProtocol::Tcp => "tcp",
    };
    let mut only = |field: &str, set: bool, allowed: bool, needed: bool| {
        if set && !allowed {
            errs.push(
                format!("{at}.{field}"),
                format!("not allowed with protocol {name}"),
            );
        } else if !set && needed {
            errs.push(
                format!("{at}.{field}"),
                format!("required with protocol {name}"),
            );
        }
    };
    let is = |p: RawProtocol| l.protocol == p;
    only(
        "cert",
        l.cert.is_some(),
        is(RawProtocol::Https),
        is(RawProtocol::Https),
    );
    only(
        "key",
        l.key.is_some(),
        is(RawProtocol::Https),
        is(RawProtocol::Https),
    );
    only("h2c", l.h2c.is_some(), is(RawProtocol::Http), false);
    only("limits", l.limits.is_some(), !is(RawProtocol::Tcp), false);
    only(
        "cluster",
        l.cluster.is_some(),
        is(RawProtocol::Tcp),
        is(RawProtocol::Tcp),
    );
    match l.protocol {
        RawProtocol::Http => Some(ListenerProtocol::Http {
            h2c: l.h2c.unwrap_or(true),
        }),
        RawProtocol::Https => Some(ListenerProtocol::Https {
            cert: PathBuf::from(l.cert.clone()?),
            key: PathBuf::from(l.key.clone()?),
        }),
        RawProtocol::Tcp => {
            let cluster = l.cluster.clone()?;
            if !clusters.iter().any(|c| c.name == cluster) {
                errs.push(
                    format!("{at}.cluster"),
                    format!("unknown cluster `{cluster}`"),
                );
            }
            Some(ListenerProtocol::Tcp { cluster })
        }
    }
}
