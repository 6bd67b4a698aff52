//! Validation of a rollout's fleet mode: `source.prometheus` (where the
//! gates are read), `targets` (whose control APIs take the weights: a list,
//! or a DNS name), `target_token_env` (the token they are called with),
//! `reconcile_interval` and `fanout` (how they are called).

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::super::super::raw::{
    RawDnsTargets, RawFanout, RawRollout, RawRolloutSource, RawTargets,
};
use super::super::super::typed::{
    DnsTargets, Fanout, QueryKey, RolloutSource, DEFAULT_DNS_REFRESH, DEFAULT_FANOUT,
    DEFAULT_RECONCILE_INTERVAL, DEFAULT_SCRAPE_INTERVAL, DEFAULT_TARGET_TOKEN_ENV,
};
use super::super::Errors;

/// The port a `resolver:` without one is asked on.
const DNS_PORT: u16 = 53;
/// The longest DNS name (RFC 1035).
const MAX_DNS_NAME: usize = 253;

/// The validated fleet fields of one rollout.
pub(super) struct Fleet {
    pub source: Option<RolloutSource>,
    pub targets: Vec<String>,
    pub discovery: Option<DnsTargets>,
    pub reconcile_interval: Duration,
    pub fanout: Fanout,
    pub token_env: String,
}

impl Fleet {
    /// Prometheus's scrape interval, when the gates are read there.
    pub(super) fn scrape_interval(&self) -> Option<Duration> {
        self.source.as_ref().map(|s| match s {
            RolloutSource::Prometheus {
                scrape_interval, ..
            } => *scrape_interval,
        })
    }
}

pub(super) fn fleet(at: &str, r: &RawRollout, errs: &mut Errors) -> Fleet {
    let source = r
        .source
        .as_ref()
        .map(|s| source(&format!("{at}.source"), s, errs));
    let (targets, discovery) = match &r.targets {
        RawTargets::List(list) => (listed(at, list, errs), None),
        RawTargets::Dns(dns) => (Vec::new(), Some(dns_targets(at, dns, errs))),
    };
    let any = !targets.is_empty() || discovery.is_some();
    let only_with_targets = |errs: &mut Errors, field: &str| {
        if !any {
            errs.push(format!("{at}.{field}"), "is only read with `targets`");
        }
    };
    if r.reconcile_interval.is_some() {
        only_with_targets(errs, "reconcile_interval");
    }
    let reconcile_interval = errs.duration(
        format!("{at}.reconcile_interval"),
        r.reconcile_interval.as_deref(),
        DEFAULT_RECONCILE_INTERVAL,
    );
    if r.fanout.is_some() {
        only_with_targets(errs, "fanout");
    }
    let fanout = fanout(at, r.fanout.as_ref(), errs);
    let token_env = match &r.target_token_env {
        None => DEFAULT_TARGET_TOKEN_ENV.to_string(),
        Some(name) => {
            let path = format!("{at}.target_token_env");
            if !any {
                errs.push(path, "is only read with `targets`");
            } else if !env_name(name) {
                errs.push(
                    path,
                    format!("`{name}` is not an environment variable name (letters, digits, `_`)"),
                );
            }
            name.clone()
        }
    };
    Fleet {
        source,
        targets,
        discovery,
        reconcile_interval,
        fanout,
        token_env,
    }
}

/// `targets: [URL, ...]`: each an http URL, none twice.
fn listed(at: &str, list: &[String], errs: &mut Errors) -> Vec<String> {
    let mut seen = HashMap::new();
    list.iter()
        .enumerate()
        .map(|(j, t)| {
            let path = format!("{at}.targets[{j}]");
            let url = url(errs, path.clone(), t, "http://sluice-2.internal:9901");
            errs.unique(&mut seen, path, "target", t.trim_end_matches('/'));
            url
        })
        .collect()
}

/// `targets: { dns: NAME:PORT, resolver: IP:PORT, refresh: 10s, scheme: http }`.
fn dns_targets(at: &str, raw: &RawDnsTargets, errs: &mut Errors) -> DnsTargets {
    let at = format!("{at}.targets");
    let (name, port) = match name_and_port(&raw.dns) {
        Some((name, port)) => (name.to_string(), port),
        None => {
            errs.push(
                format!("{at}.dns"),
                format!(
                    "`{}` is not NAME:PORT like sluice-admin.prod.svc.cluster.local:9901",
                    raw.dns
                ),
            );
            (raw.dns.clone(), 0)
        }
    };
    let resolver = raw.resolver.as_deref().and_then(|text| {
        let addr = text.parse::<SocketAddr>().ok().or_else(|| {
            text.parse::<IpAddr>()
                .ok()
                .map(|ip| SocketAddr::new(ip, DNS_PORT))
        });
        if addr.is_none() {
            errs.push(
                format!("{at}.resolver"),
                format!("`{text}` is not a DNS server address like 10.96.0.10:53"),
            );
        }
        addr
    });
    match raw.scheme.as_deref() {
        None | Some("http") => {}
        Some("https") => errs.push(
            format!("{at}.scheme"),
            "https is not supported here yet; use http (a trusted network, or a TLS proxy next to it)",
        ),
        Some(other) => errs.push(
            format!("{at}.scheme"),
            format!("unknown scheme `{other}` (expected http)"),
        ),
    }
    DnsTargets {
        name,
        port,
        resolver,
        refresh: errs.duration(
            format!("{at}.refresh"),
            raw.refresh.as_deref(),
            DEFAULT_DNS_REFRESH,
        ),
    }
}

/// `NAME:PORT` with a DNS name (letters, digits, `-`, `_`, dots between
/// labels) or an IP address, and a port from 1.
fn name_and_port(text: &str) -> Option<(&str, u16)> {
    let (name, port) = text.rsplit_once(':')?;
    let port = port.parse::<u16>().ok().filter(|p| *p > 0)?;
    let name = name.strip_suffix('.').unwrap_or(name);
    let labels_ok = name.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    });
    (labels_ok && name.len() <= MAX_DNS_NAME).then_some((name, port))
}

/// `fanout: { concurrency: 64, timeout: 2s }`.
fn fanout(at: &str, raw: Option<&RawFanout>, errs: &mut Errors) -> Fanout {
    let Some(raw) = raw else {
        return DEFAULT_FANOUT;
    };
    let concurrency = match raw.concurrency {
        None => DEFAULT_FANOUT.concurrency,
        Some(0) => {
            errs.push(format!("{at}.fanout.concurrency"), "must be at least 1");
            DEFAULT_FANOUT.concurrency
        }
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
    };
    Fanout {
        concurrency,
        timeout: errs.duration(
            format!("{at}.fanout.timeout"),
            raw.timeout.as_deref(),
            DEFAULT_FANOUT.timeout,
        ),
    }
}

fn env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn source(at: &str, s: &RawRolloutSource, errs: &mut Errors) -> RolloutSource {
    let p = &s.prometheus;
    let at = format!("{at}.prometheus");
    let mut queries = BTreeMap::new();
    for (text, query) in &p.queries {
        let path = format!("{at}.queries.{text}");
        match QueryKey::parse(text) {
            Err(e) => errs.push(path, e.to_string()),
            Ok(_) if query.trim().is_empty() => errs.push(path, "must not be empty"),
            // `gap_p99` and its alias `itl_p99` are one gate.
            Ok(key) => {
                if queries.insert(key, query.clone()).is_some() {
                    errs.push(path, format!("`{}` is set twice", key.as_str()));
                }
            }
        }
    }
    RolloutSource::Prometheus {
        url: url(errs, format!("{at}.url"), &p.url, "http://127.0.0.1:9090"),
        scrape_interval: errs.duration(
            format!("{at}.scrape_interval"),
            p.scrape_interval.as_deref(),
            DEFAULT_SCRAPE_INTERVAL,
        ),
        queries,
    }
}

/// An `http` URL with a host; returned without a trailing `/`. The
/// control plane's client speaks plain HTTP only, so `https` is refused
/// here rather than failing on every call.
fn url(errs: &mut Errors, path: String, text: &str, example: &str) -> String {
    let uri = text.parse::<http::Uri>().ok();
    let scheme = uri.as_ref().and_then(|u| u.scheme_str());
    let host = uri
        .as_ref()
        .and_then(|u| u.host())
        .is_some_and(|h| !h.is_empty());
    match (scheme, host) {
        (Some("http"), true) => {}
        (Some("https"), true) => errs.push(
            path,
            format!("`{text}`: https is not supported here yet; use http:// (a trusted network, or a TLS proxy next to it)"),
        ),
        _ => errs.push(path, format!("`{text}` is not an http URL like {example}")),
    }
    text.trim_end_matches('/').to_string()
}
