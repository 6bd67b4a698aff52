//! Load traffic: the header `sluice load` marks each request with (its run
//! id), the peer ranges whose mark sluice believes (`load.trusted_peers`),
//! and the pure decision, per request, of what the proxy does with a mark:
//! label the request, or strip the header before forwarding it.

use std::fmt;
use std::net::IpAddr;

/// The header that marks load traffic with the run's id.
pub const LOAD_HEADER: &str = "x-sluice-load";
/// On the answers to load traffic (a trusted peer's marked requests only):
/// the cluster that served it and that cluster's `version` label, so a run
/// records which versions it measured.
pub const SERVED_CLUSTER_HEADER: &str = "x-sluice-cluster";
pub const SERVED_VERSION_HEADER: &str = "x-sluice-version";
/// Beside them: the lineage id of that cluster version, so a run's
/// lineage names the model it measured.
pub const SERVED_LINEAGE_HEADER: &str = "x-sluice-lineage";
/// Beside them, when the upstream scrape has a reading: the KV-cache usage
/// (0..1) of the endpoint that served it, as last scraped (`kvcache_ratio`).
pub const KVCACHE_RATIO_HEADER: &str = "x-sluice-kvcache-ratio";
/// The longest run id believed.
pub const MAX_RUN_ID: usize = 64;

/// An address range, `10.0.0.0/8` or `::1/128`. A bare address is the range
/// of that one address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// `127.0.0.0/8`.
    pub const LOOPBACK_V4: Cidr = Cidr {
        addr: IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 0)),
        prefix: 8,
    };
    /// `::1/128`.
    pub const LOOPBACK_V6: Cidr = Cidr {
        addr: IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        prefix: 128,
    };

    /// Reads `ADDR/PREFIX` or a bare address. The error says what is wrong
    /// (no path: the caller knows where the text came from).
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let (addr_text, prefix_text) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let addr: IpAddr = addr_text
            .parse()
            .map_err(|_| format!("`{text}` is not an address range like 10.0.0.0/8 or fd00::/8"))?;
        let max = max_prefix(addr);
        let prefix = match prefix_text {
            None => max,
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= max => n,
                _ => {
                    return Err(format!(
                        "`{text}`: the prefix length must be a number from 0 to {max}"
                    ))
                }
            },
        };
        let cidr = Cidr { addr, prefix };
        if cidr.network() != addr {
            return Err(format!(
                "`{text}` has address bits set past the prefix; the range is {}",
                Cidr {
                    addr: cidr.network(),
                    prefix
                }
            ));
        }
        Ok(cidr)
    }

    /// Whether `ip` is in the range. An IPv4-mapped IPv6 address
    /// (`::ffff:10.1.2.3`, what a dual-stack socket reports for an IPv4
    /// peer) is matched as the IPv4 address it maps.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = mask32(self.prefix);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = mask128(self.prefix);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }

    fn network(&self) -> IpAddr {
        match self.addr {
            IpAddr::V4(a) => IpAddr::V4((u32::from(a) & mask32(self.prefix)).into()),
            IpAddr::V6(a) => IpAddr::V6((u128::from(a) & mask128(self.prefix)).into()),
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

fn max_prefix(addr: IpAddr) -> u8 {
    match addr {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

fn mask32(prefix: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0)
}

fn mask128(prefix: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0)
}

/// Whose traffic a request is, as the `source` label of the request
/// metrics: two values, whatever the run ids.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Source {
    #[default]
    User,
    Load,
}

impl Source {
    pub const ALL: [Source; 2] = [Source::User, Source::Load];
    /// The label's name on the request metrics.
    pub const LABEL: &'static str = "source";

    pub fn label(self) -> &'static str {
        match self {
            Source::User => "user",
            Source::Load => "load",
        }
    }

    /// Position in [`Source::ALL`], for handles resolved per source.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Why a load mark was not believed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stripped {
    /// The peer is outside `load.trusted_peers` (or has no IP address).
    Untrusted,
    /// From a trusted peer, but not a run id: empty, too long, or with a
    /// character outside `[A-Za-z0-9._:-]`.
    Invalid,
}

impl Stripped {
    pub const ALL: [Stripped; 2] = [Stripped::Untrusted, Stripped::Invalid];

    pub fn reason(self) -> &'static str {
        match self {
            Stripped::Untrusted => "untrusted",
            Stripped::Invalid => "invalid",
        }
    }
}

/// What the proxy does with a request's load mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadMark<'a> {
    /// No header: a user's request.
    Absent,
    /// Load traffic of this run: the header is kept and the request labelled.
    Load(&'a str),
    /// The header is removed before forwarding and the request counted as a
    /// user's, so that no client can hide from the rollout gates.
    Strip(Stripped),
}

impl LoadMark<'_> {
    pub fn source(&self) -> Source {
        match self {
            LoadMark::Load(_) => Source::Load,
            LoadMark::Absent | LoadMark::Strip(_) => Source::User,
        }
    }
}

/// Decides from the peer's address, the trusted ranges and the header's
/// value (`None` without the header) whether a request is load traffic.
/// The peer is checked first: an untrusted peer's header is stripped
/// whatever it holds.
pub fn classify<'a>(
    peer: Option<IpAddr>,
    trusted: &[Cidr],
    header: Option<&'a [u8]>,
) -> LoadMark<'a> {
    let Some(value) = header else {
        return LoadMark::Absent;
    };
    if !peer.is_some_and(|ip| trusted.iter().any(|c| c.contains(ip))) {
        return LoadMark::Strip(Stripped::Untrusted);
    }
    match run_id(value) {
        Some(id) => LoadMark::Load(id),
        None => LoadMark::Strip(Stripped::Invalid),
    }
}

/// `value` as a run id: 1 to [`MAX_RUN_ID`] characters of `[A-Za-z0-9._:-]`.
pub fn run_id(value: &[u8]) -> Option<&str> {
    let ok = !value.is_empty()
        && value.len() <= MAX_RUN_ID
        && value
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
    // ASCII only, by the check above.
    ok.then(|| std::str::from_utf8(value).ok()).flatten()
}

#[cfg(test)]
mod tests;
