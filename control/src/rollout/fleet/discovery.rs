//! DNS targets: every A and AAAA record of a name (a Kubernetes headless
//! Service lists one per ready pod) is a target, `http://ADDRESS:PORT`.
//! `Discovery` asks the server named by `resolver:` (UDP, TCP when an
//! answer is truncated) or the system's (`/etc/resolv.conf`);
//! `DiscoveryStatus` keeps the last good set and what the status shows. A
//! failed or empty answer keeps the last good set: a DNS hiccup must not
//! take every target away from a rollout in the middle of a rollback.

use std::collections::BTreeSet;
use std::time::Duration;

use hickory_resolver::config::{
    LookupIpStrategy, NameServerConfigGroup, ResolveHosts, ResolverConfig, ResolverOpts,
};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::TokioResolver;
use serde::Serialize;

use crate::config::DnsTargets;

/// One lookup (every server and attempt) gives up after this.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// A resolver for one rollout's `targets.dns`; a clone shares it.
#[derive(Clone)]
pub(crate) struct Discovery {
    /// What it was built for; a changed definition builds a new one.
    pub targets: DnsTargets,
    resolver: Result<TokioResolver, String>,
}

impl Discovery {
    pub(crate) fn new(targets: &DnsTargets) -> Discovery {
        Discovery {
            targets: targets.clone(),
            resolver: resolver(targets.resolver),
        }
    }

    /// The targets the name resolves to now, sorted; `Err` says why there
    /// are none (no answer, no record, no resolver).
    pub(crate) async fn resolve(&self) -> Result<Vec<String>, String> {
        let resolver = self.resolver.as_ref().map_err(Clone::clone)?;
        let name = &self.targets.name;
        let lookup = tokio::time::timeout(LOOKUP_TIMEOUT, resolver.lookup_ip(name.as_str()))
            .await
            .map_err(|_| format!("`{name}`: no answer within {LOOKUP_TIMEOUT:?}"))?
            .map_err(|e| format!("`{name}`: {e}"))?;
        let ips: BTreeSet<_> = lookup.iter().collect();
        if ips.is_empty() {
            return Err(format!("`{name}`: no A or AAAA record"));
        }
        Ok(ips.into_iter().map(|ip| self.targets.url(ip)).collect())
    }
}

/// A resolver asking `server`, or the system's servers.
fn resolver(server: Option<std::net::SocketAddr>) -> Result<TokioResolver, String> {
    let provider = TokioConnectionProvider::default();
    let mut builder = match server {
        Some(addr) => {
            let servers = NameServerConfigGroup::from_ips_clear(&[addr.ip()], addr.port(), true);
            let mut builder = TokioResolver::builder_with_config(
                ResolverConfig::from_parts(None, Vec::new(), servers),
                provider,
            );
            builder.options_mut().use_hosts_file = ResolveHosts::Never;
            builder
        }
        None => TokioResolver::builder(provider)
            .map_err(|e| format!("reading the system's DNS config: {e}"))?,
    };
    let opts: &mut ResolverOpts = builder.options_mut();
    // Both families: a dual-stack Service lists each pod twice, and an
    // IPv6-only one has no A record.
    opts.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
    // The name is asked again every `refresh`; a cached answer would hide
    // the pods that came and went since.
    opts.cache_size = 0;
    opts.positive_max_ttl = Some(Duration::ZERO);
    opts.negative_max_ttl = Some(Duration::ZERO);
    // A Service of more than ~30 pods does not fit the 512 bytes of plain
    // DNS over UDP: EDNS asks for more; a server that still truncates is
    // asked again over TCP.
    opts.edns0 = true;
    opts.timeout = Duration::from_secs(2);
    opts.attempts = 2;
    Ok(builder.build())
}

/// What the status shows of `targets.dns`, and the last good set.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DiscoveryStatus {
    /// `NAME:PORT` as configured.
    pub dns: String,
    /// The DNS server asked; absent: the system's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolver: Option<String>,
    /// The addresses of the last good answer.
    pub addresses: usize,
    /// Wall clock of the last good answer, milliseconds since the Unix
    /// epoch; absent before the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved_ms: Option<u64>,
    /// Lookups in a row that failed.
    pub failures: u32,
    /// Why the last lookup failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What one lookup means for the targets.
#[derive(Debug, PartialEq)]
pub(crate) enum Resolution {
    /// The targets are these now; `recovered` after failed lookups.
    Found { urls: Vec<String>, recovered: bool },
    /// The targets stay as they are. `first`: the first failure in a row
    /// (reported; the next ones are only counted).
    Kept { first: bool, error: String },
}

impl DiscoveryStatus {
    pub(crate) fn new(targets: &DnsTargets) -> DiscoveryStatus {
        DiscoveryStatus {
            dns: targets.label(),
            resolver: targets.resolver.map(|r| r.to_string()),
            ..DiscoveryStatus::default()
        }
    }

    /// Records one lookup's `result` at wall-clock `now_ms`.
    pub(crate) fn record(
        &mut self,
        result: Result<Vec<String>, String>,
        now_ms: u64,
    ) -> Resolution {
        match result {
            Ok(urls) => {
                let recovered = self.failures > 0;
                self.addresses = urls.len();
                self.resolved_ms = Some(now_ms);
                self.failures = 0;
                self.error = None;
                Resolution::Found { urls, recovered }
            }
            Err(error) => {
                self.failures += 1;
                self.error = Some(error.clone());
                Resolution::Kept {
                    first: self.failures == 1,
                    error,
                }
            }
        }
    }
}
