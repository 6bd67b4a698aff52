//! Helpers the end-to-end tests share: free ports and readiness polling, the echo upstream
//! (plain, h2c, TLS), TLS material, a Redis child process, a Prometheus server, a DNS
//! server for one name, the venv Python. The fake LLM is `sluice_cli::MockLlm`, the one the binary serves.
//!
//! Everything binds 127.0.0.1 only, reports its address, and stops when its handle drops.
// The tests that use these helpers live in sibling modules and not every helper (or
// re-export below) has a user in every build of the binary.
#![allow(dead_code, unused_imports)]

mod chroma;
mod dns;
mod net;
mod node;
mod process;
mod prometheus_server;
mod python;
mod redis;
mod temp;
mod tls;
mod upstream;

#[cfg(test)]
mod tests;

pub(crate) use chroma::{chroma_bin, Chroma};
pub(crate) use dns::DnsServer;
pub(crate) use net::{free_port, wait_for_tcp, WAIT_POLL};
pub(crate) use node::{node_modules, node_package_available};
pub(crate) use process::Process;
pub(crate) use prometheus_server::{have, Prometheus};
pub(crate) use python::{python, run_json, workspace_root};
pub(crate) use redis::{redis_available, RedisServer};
pub(crate) use temp::TempDir;
pub(crate) use tls::{install_crypto_provider, TlsFixture};
pub(crate) use upstream::{sha256_hex, NamedUpstream};

/// Whether a test that needs `what` should run. When it is missing the test is skipped
/// with a note on stderr, except in CI (`CI` set), where a missing part is a failure:
/// `scripts/test.sh` installs everything the tests need, so a skip there hides a bug.
pub(crate) fn require(what: &str, available: bool) -> bool {
    if available {
        return true;
    }
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false") {
        panic!("{what} is missing in CI: scripts/install-deps.sh should have installed it");
    }
    eprintln!("skipped: {what} is not available (run scripts/install-deps.sh)");
    false
}
