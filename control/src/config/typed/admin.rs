//! The control API's own settings: where it listens, who may call it with
//! which scope, its TLS and its audit file.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

sluice_filters::name_table! {
    /// What a token may do. Each scope holds the ones before it (the
    /// table's order is its `Ord`): `admin` ⊇ `write` ⊇ `read`.
    pub enum Scope: "scope" {
        /// Every `GET`.
        Read = "read",
        /// The data-plane knobs: weights, faults, mirror, recorder, load runs.
        Write = "write",
        /// The config and the rollouts, and everything else.
        Admin = "admin",
    }
}

impl Scope {
    /// Whether a token of this scope may do what `needed` allows.
    pub fn allows(self, needed: Scope) -> bool {
        self >= needed
    }
}

/// Where some of the API's tokens come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenSource {
    /// One token, its secret the value of the variable `var`
    /// (`admin.token_env` is `default` with scope `admin`).
    Env {
        name: String,
        scope: Scope,
        var: String,
    },
    /// One token, its secret the whole (trimmed) content of `path`;
    /// re-read when the file changes.
    Secret {
        name: String,
        scope: Scope,
        path: PathBuf,
    },
    /// `admin.token_file`: one bare token (`default`, scope `admin`) or
    /// lines `name scope token`; re-read when the file changes.
    File(PathBuf),
}

/// TLS on the admin listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// With it, a client without a certificate this CA signed is refused
    /// at the handshake.
    pub client_ca: Option<PathBuf>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminConfig {
    pub listen: SocketAddr,
    /// Where the tokens come from; none configured: one `admin` token is
    /// generated at start (loopback only).
    pub tokens: Vec<TokenSource>,
    pub tls: Option<AdminTls>,
    /// Where the audit log is appended as JSON lines.
    pub audit_file: Option<PathBuf>,
    /// The largest request body the API reads, in bytes.
    pub max_body: usize,
    /// The deepest nesting of objects and lists a body may have.
    pub max_body_depth: usize,
    /// Where Toxiproxy's REST API is served (a loopback address).
    pub toxiproxy: Option<SocketAddr>,
    /// The TTL of a toxic added through Toxiproxy's API, which has none.
    pub toxiproxy_default_ttl: Duration,
}
