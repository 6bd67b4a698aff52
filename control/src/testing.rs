//! Setup the control plane's unit tests share: the configs most of them start from, the store
//! built on a config as at boot, and a request to match routes and faults against.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use sluice_filters::{Metrics, RequestView};

use crate::config::Config;
use crate::stats::Stats;
use crate::store::SnapshotStore;

/// Listener `public` and clusters `a` (v1) and `b` (v2), no route: the head of the configs
/// of tests that split, reload or match between two clusters.
pub(crate) const AB: &str = r#"
listeners:
  - { name: public, listen: 127.0.0.1:18080, protocol: http }
clusters:
  - { name: a, kind: llm, version: v1, endpoints: [127.0.0.1:18001] }
  - { name: b, kind: llm, version: v2, endpoints: [127.0.0.1:18002] }
"#;

/// Listener `public`, clusters `stable` (v1) and `canary` (v2) and route `chat` all on
/// `stable`: where every rollout test starts. `rollouts:` may follow.
pub(crate) const STABLE_CANARY: &str = r#"
listeners:
  - { name: public, listen: 127.0.0.1:18080, protocol: http }
clusters:
  - { name: stable, kind: llm, version: v1, endpoints: [127.0.0.1:18001] }
  - { name: canary, kind: llm, version: v2, endpoints: [127.0.0.1:18002] }
routes:
  - { name: chat, listener: public, split: { stable: 100, canary: 0 } }
"#;

/// [`AB`] with route `chat` split `a: 100, b: 0`, and `extra` keys on the route
/// (`sticky: { header: x-session-id }`).
pub(crate) fn ab_chat(extra: &str) -> String {
    let extra = match extra {
        "" => String::new(),
        extra => format!(", {extra}"),
    };
    format!(
        "{AB}routes:\n  - {{ name: chat, listener: public, split: {{ a: 100, b: 0 }}{extra} }}\n"
    )
}

/// `yaml` parsed and validated; a test's config that does not parse is the test's bug.
pub(crate) fn config(yaml: &str) -> Config {
    Config::from_yaml(yaml).unwrap_or_else(|e| panic!("test config invalid:\n{e}\n{yaml}"))
}

/// The store on `yaml`, with fresh metrics and stats, as `Sluice::start` builds it.
pub(crate) fn store(yaml: &str) -> Arc<SnapshotStore> {
    SnapshotStore::new(config(yaml), Metrics::new().unwrap(), Stats::new())
}

/// A request with a path and headers, and no host.
pub(crate) struct Req(pub &'static str, pub Vec<(&'static str, &'static str)>);

impl RequestView for Req {
    fn path(&self) -> &str {
        self.0
    }
    fn host(&self) -> Option<&str> {
        None
    }
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.1
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_bytes())
    }
}
