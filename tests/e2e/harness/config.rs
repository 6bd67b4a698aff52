//! One builder for the YAML of a test's config. A test names what it needs (listeners,
//! clusters, routes, any other top-level section) and gets text that `Config::from_yaml`
//! reads; the parts every test shares (admin on an ephemeral port, a small runtime, the
//! listener `public`) are written here once.

use std::fmt::Display;

use sluice_proxy::Sluice;

/// Where a listener binds unless the test says otherwise: an ephemeral port, which
/// `Sluice::start` reports as bound (`harness::listener`), so no port is raced for.
pub(super) fn loopback_listen() -> String {
    "127.0.0.1:0".to_string()
}

/// A test's config, section by section; [`TestConfig::yaml`] writes it out.
#[derive(Clone, Debug)]
pub(crate) struct TestConfig {
    /// The body of the `admin` flow map.
    admin: String,
    /// The body of the `runtime` flow map; `None` leaves the section out.
    runtime: Option<String>,
    listeners: Vec<String>,
    clusters: Vec<String>,
    routes: Vec<String>,
    /// Other top-level sections, each written as given.
    sections: Vec<String>,
}

impl Default for TestConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl TestConfig {
    /// The admin API on `127.0.0.1:0`, two runtime threads and a 5 s grace period; no
    /// listener yet.
    pub(crate) fn new() -> Self {
        Self {
            admin: "listen: 127.0.0.1:0".to_owned(),
            runtime: Some("threads: 2, grace_period: 5s".to_owned()),
            listeners: Vec::new(),
            clusters: Vec::new(),
            routes: Vec::new(),
            sections: Vec::new(),
        }
    }

    /// [`TestConfig::new`] with the http listener `public`, the one [`TestConfig::route`]
    /// puts routes on.
    pub(crate) fn http() -> Self {
        Self::new().listener("public", "http", "")
    }

    /// Replaces the `admin` flow map's body (`listen: ..., token_env: ...`).
    pub(crate) fn admin(mut self, body: impl Into<String>) -> Self {
        self.admin = body.into();
        self
    }

    /// Replaces the `runtime` flow map's body (`threads: 1, grace_period: 1s`).
    pub(crate) fn runtime(mut self, body: impl Into<String>) -> Self {
        self.runtime = Some(body.into());
        self
    }

    /// A listener on [`loopback_listen`]; `extra` adds keys (`cluster: redis`, `cert: ...`).
    pub(crate) fn listener(self, name: &str, protocol: &str, extra: &str) -> Self {
        self.listener_at(name, protocol, loopback_listen(), extra)
    }

    /// A listener on `listen`, for a test that must know the port before the start.
    pub(crate) fn listener_at(
        mut self,
        name: &str,
        protocol: &str,
        listen: impl Display,
        extra: &str,
    ) -> Self {
        self.listeners.push(flow(&[
            &format!("name: {name}, listen: {listen}, protocol: {protocol}"),
            extra,
        ]));
        self
    }

    /// A cluster of `kind` on `endpoints`.
    pub(crate) fn cluster<T: Display>(
        self,
        name: &str,
        kind: &str,
        endpoints: impl IntoIterator<Item = T>,
    ) -> Self {
        self.cluster_with(name, kind, endpoints, "")
    }

    /// [`TestConfig::cluster`] with more keys (`version: v1, timeouts: { ... }`).
    pub(crate) fn cluster_with<T: Display>(
        mut self,
        name: &str,
        kind: &str,
        endpoints: impl IntoIterator<Item = T>,
        extra: &str,
    ) -> Self {
        let endpoints: Vec<String> = endpoints.into_iter().map(|e| format!("\"{e}\"")).collect();
        self.clusters.push(flow(&[
            &format!(
                "name: {name}, kind: {kind}, endpoints: [{}]",
                endpoints.join(", ")
            ),
            extra,
        ]));
        self
    }

    /// A route on listener `public` with `split` as the body of its split map (`a: 90, b: 10`).
    pub(crate) fn route(self, name: &str, split: &str) -> Self {
        self.route_with(name, split, "")
    }

    /// [`TestConfig::route`] with more keys (`match: { ... }, sticky: { ... }, mirror: ...`).
    pub(crate) fn route_with(mut self, name: &str, split: &str, extra: &str) -> Self {
        self.routes.push(flow(&[
            &format!("name: {name}, listener: public, split: {{ {split} }}"),
            extra,
        ]));
        self
    }

    /// Any other top-level section: `key: value`, where `value` is a flow map or list, or a
    /// block that starts on the next line (`"\n  - name: ..."`).
    pub(crate) fn section(mut self, key: &str, value: impl Display) -> Self {
        self.sections.push(format!("{key}: {value}"));
        self
    }

    /// The config as YAML.
    pub(crate) fn yaml(&self) -> String {
        let mut out = format!("admin: {{ {} }}\n", self.admin);
        if let Some(runtime) = &self.runtime {
            out.push_str(&format!("runtime: {{ {runtime} }}\n"));
        }
        for (key, items) in [
            ("listeners", &self.listeners),
            ("clusters", &self.clusters),
            ("routes", &self.routes),
        ] {
            if !items.is_empty() {
                out.push_str(key);
                out.push_str(":\n");
                for item in items {
                    out.push_str(&format!("  - {item}\n"));
                }
            }
        }
        for section in &self.sections {
            out.push_str(section);
            out.push('\n');
        }
        out
    }

    /// Sluice started in-process on this config.
    pub(crate) fn start(&self) -> Sluice {
        super::start(&self.yaml())
    }
}

/// `{ a, b }` of the parts that are not empty.
fn flow(parts: &[&str]) -> String {
    let parts: Vec<&str> = parts.iter().copied().filter(|p| !p.is_empty()).collect();
    format!("{{ {} }}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_section_in_order_and_parses() {
        let yaml = TestConfig::http()
            .runtime("threads: 1, grace_period: 1s")
            .cluster("a", "llm", ["127.0.0.1:1"])
            .cluster_with("b", "llm", ["127.0.0.1:2", "127.0.0.1:3"], "version: v2")
            .route_with("chat", "a: 90, b: 10", "sticky: { header: x-session-id }")
            .section("telemetry", "{ access_log: { path: /tmp/x.log } }")
            .yaml();
        let listen = yaml
            .lines()
            .find_map(|l| l.strip_prefix("  - { name: public, listen: "))
            .unwrap();
        assert!(listen.starts_with("127.0.0.1:"), "{yaml}");
        let want = "admin: { listen: 127.0.0.1:0 }\n\
             runtime: { threads: 1, grace_period: 1s }\n\
             listeners:\n";
        assert!(yaml.starts_with(want), "{yaml}");
        let tail = "clusters:\n  \
             - { name: a, kind: llm, endpoints: [\"127.0.0.1:1\"] }\n  \
             - { name: b, kind: llm, endpoints: [\"127.0.0.1:2\", \"127.0.0.1:3\"], version: v2 }\n\
             routes:\n  \
             - { name: chat, listener: public, split: { a: 90, b: 10 }, sticky: { header: x-session-id } }\n\
             telemetry: { access_log: { path: /tmp/x.log } }\n";
        assert!(yaml.ends_with(tail), "{yaml}");
        let config = sluice_control::Config::from_yaml(&yaml).unwrap();
        assert_eq!(config.clusters.len(), 2);
    }
}
