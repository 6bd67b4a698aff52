#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

mod admin;
mod by_model;
mod cost;
mod coverage;
mod faults;
mod feedback;
mod fleet_limits;
mod fleet_targets;
mod lineage;
mod listener_limits;
mod load;
mod max_body;
mod mirror;
mod mirror_gates;
mod plans;
mod protocol;
mod recorder;
mod rollouts;
mod shedding;
mod upstream_health;

const GOOD: &str = r#"
runtime: { threads: 2, grace_period: 10s }
admin: { listen: 127.0.0.1:9901, token_env: SLUICE_ADMIN_TOKEN }
listeners:
  - { name: public, listen: 127.0.0.1:8080, protocol: http }
  - { name: cache, listen: 127.0.0.1:6380, protocol: tcp, cluster: redis }
clusters:
  - { name: llm-stable, kind: llm, version: v1, endpoints: [127.0.0.1:8000],
      timeouts: { connect: 1s, first_byte: 120s, idle: 4s } }
  - { name: llm-canary, kind: llm, version: v2, endpoints: ["localhost:8001"] }
  - { name: redis, kind: cache, endpoints: [127.0.0.1:6379] }
routes:
  - name: chat
    listener: public
    match: { path_prefix: /v1/, headers: { X-Tenant: a } }
    split: { llm-stable: 95, llm-canary: 5 }
    sticky: { header: X-Session-Id }
"#;

/// Replaces the first occurrence of `from` in the good config by `to`, and
/// returns every error line.
fn errors_of(from: &str, to: &str) -> Vec<String> {
    assert!(GOOD.contains(from), "test setup: `{from}` not in GOOD");
    errors_in(&GOOD.replacen(from, to, 1))
}

fn errors_in(text: &str) -> Vec<String> {
    match Config::from_yaml(text) {
        Ok(_) => panic!("config unexpectedly valid:\n{text}"),
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn good_config_validates() {
    let c = Config::from_yaml(GOOD).unwrap();
    assert_eq!(c.runtime.threads, 2);
    assert_eq!(c.runtime.grace_period, std::time::Duration::from_secs(10));
    assert_eq!(c.listeners.len(), 2);
    assert_eq!(
        c.routes[0].split,
        vec![("llm-canary".into(), 5), ("llm-stable".into(), 95)]
    );
    assert_eq!(c.routes[0].sticky.as_ref().unwrap().header, "x-session-id");
    assert_eq!(c.routes[0].matcher.headers[0].name, "x-tenant");
    assert_eq!(c.clusters[1].endpoints[0].host, "localhost");
    assert_eq!(
        c.clusters[0].timeouts.idle,
        std::time::Duration::from_secs(4)
    );
    assert_eq!(
        c.admin.tokens,
        [TokenSource::Env {
            name: "default".into(),
            scope: Scope::Admin,
            var: "SLUICE_ADMIN_TOKEN".into()
        }]
    );
}

#[test]
fn raw_round_trips_through_yaml() {
    let c = Config::from_yaml(GOOD).unwrap();
    let again = Config::from_yaml(&c.raw.to_yaml()).unwrap();
    assert_eq!(again.raw, c.raw);
}

#[test]
fn empty_document_is_an_empty_config() {
    let c = Config::from_yaml("").unwrap();
    assert!(c.listeners.is_empty());
    assert_eq!(c.admin.listen.to_string(), "127.0.0.1:9901");
}

#[test]
fn unknown_top_level_key() {
    let e = errors_in("listenerz: []\n");
    assert_eq!(e.len(), 1);
    assert!(
        e[0].starts_with("listenerz: unknown field `listenerz`, expected one of `runtime`, `admin`, `listeners`, `clusters`, `routes`"),
        "{e:?}"
    );
}

#[test]
fn unknown_nested_key_has_its_path() {
    let e = errors_of("protocol: http }", "protocol: http, tls: true }");
    assert_eq!(e.len(), 1);
    assert!(
        e[0].starts_with("listeners[0].tls: unknown field `tls`"),
        "{e:?}"
    );
}

#[test]
fn bad_protocol() {
    let e = errors_of("protocol: http }", "protocol: htp }");
    assert!(
        e[0].starts_with(
            "listeners[0].protocol: unknown variant `htp`, expected one of `http`, `https`, `tcp`"
        ),
        "{e:?}"
    );
}

#[test]
fn bad_duration() {
    assert_eq!(
        errors_of("connect: 1s", "connect: 1 sec"),
        ["clusters[0].timeouts.connect: `1 sec` has unknown unit ` sec` (use us, ms, s, m or h)"]
    );
    assert_eq!(
        errors_of("grace_period: 10s", "grace_period: 0s"),
        ["runtime.grace_period: must be greater than 0"]
    );
}

#[test]
fn unknown_cluster_in_split() {
    assert_eq!(
        errors_of("llm-canary: 5 }", "llm-canery: 5 }"),
        ["routes[0].split.llm-canery: unknown cluster `llm-canery`"]
    );
}

#[test]
fn weights_sum_to_zero() {
    assert_eq!(
        errors_of(
            "{ llm-stable: 95, llm-canary: 5 }",
            "{ llm-stable: 0, llm-canary: 0 }"
        ),
        ["routes[0].split: weights sum to 0"]
    );
}

#[test]
fn negative_weight() {
    let e = errors_of("llm-canary: 5 }", "llm-canary: -5 }");
    assert!(
        e[0].starts_with("routes[0].split.llm-canary: invalid type: integer `-5`, expected u32"),
        "{e:?}"
    );
}

#[test]
fn duplicate_listener() {
    assert_eq!(
        errors_of(
            "name: cache, listen: 127.0.0.1:6380",
            "name: public, listen: 127.0.0.1:6380"
        ),
        ["listeners[1].name: duplicate listener `public` (first at listeners[0].name)"]
    );
}

#[test]
fn duplicate_address() {
    assert_eq!(
        errors_of("listen: 127.0.0.1:6380", "listen: 127.0.0.1:8080"),
        ["listeners[1].listen: 127.0.0.1:8080 is already used by listeners[0].listen"]
    );
}

#[test]
fn port_0_may_be_asked_for_by_every_listener_and_the_admin_api() {
    let yaml = "admin: { listen: 127.0.0.1:0 }\nlisteners:\n  \
                - { name: a, listen: 127.0.0.1:0, protocol: http }\n  \
                - { name: b, listen: 127.0.0.1:0, protocol: http }\n";
    let config = Config::from_yaml(yaml).unwrap();
    assert_eq!(config.listeners.len(), 2);
}

#[test]
fn bad_addresses() {
    assert_eq!(
        errors_of("listen: 127.0.0.1:8080", "listen: 127.0.0.1"),
        ["listeners[0].listen: `127.0.0.1` is not an address like 127.0.0.1:8080"]
    );
    assert_eq!(
        errors_of("[127.0.0.1:8000]", "[127.0.0.1]"),
        ["clusters[0].endpoints[0]: `127.0.0.1` is not host:port"]
    );
    assert_eq!(
        errors_of("[127.0.0.1:8000]", "[\"no-such-host.invalid:80\"]"),
        ["clusters[0].endpoints[0]: cannot resolve `no-such-host.invalid`"]
    );
}

#[test]
fn protocol_field_mismatches() {
    assert_eq!(
        errors_of("protocol: tcp, cluster: redis", "protocol: tcp"),
        ["listeners[1].cluster: required with protocol tcp"]
    );
    assert_eq!(
        errors_of("protocol: http }", "protocol: http, cluster: redis }"),
        ["listeners[0].cluster: not allowed with protocol http"]
    );
    assert_eq!(
        errors_of("protocol: http }", "protocol: https }"),
        [
            "listeners[0].cert: required with protocol https",
            "listeners[0].key: required with protocol https"
        ]
    );
    assert_eq!(
        errors_of(
            "protocol: tcp, cluster: redis",
            "protocol: tcp, cluster: redis, h2c: true"
        ),
        ["listeners[1].h2c: not allowed with protocol tcp"]
    );
}

#[test]
fn route_on_tcp_listener_and_unknown_listener() {
    assert_eq!(
        errors_of("listener: public", "listener: cache"),
        ["routes[0].listener: listener `cache` is tcp; routes need an http or https listener"]
    );
    assert_eq!(
        errors_of("listener: public", "listener: pubic"),
        ["routes[0].listener: unknown listener `pubic`"]
    );
}

#[test]
fn cache_cluster_in_http_split() {
    assert_eq!(
        errors_of("llm-canary: 5 }", "redis: 5 }"),
        ["routes[0].split.redis: cluster `redis` is kind cache, which only tcp listeners serve"]
    );
}

#[test]
fn no_token_off_loopback() {
    assert_eq!(
        errors_of(
            "admin: { listen: 127.0.0.1:9901, token_env: SLUICE_ADMIN_TOKEN }",
            "admin: { listen: 0.0.0.0:9901 }"
        ),
        ["admin: a token (token_env, token_file or tokens) is required to listen on non-loopback 0.0.0.0:9901"]
    );
}

#[test]
fn every_error_is_reported_at_once() {
    let text = GOOD
        .replacen("threads: 2", "threads: 0", 1)
        .replacen("endpoints: [127.0.0.1:8000]", "endpoints: []", 1)
        .replacen("path_prefix: /v1/", "path_prefix: v1", 1)
        .replacen("header: X-Session-Id", "header: \"bad header\"", 1)
        .replacen("name: llm-canary", "name: \"llm canary\"", 1);
    assert_eq!(
        errors_in(&text),
        [
            "runtime.threads: must be at least 1",
            "clusters[0].endpoints: at least one endpoint is required",
            "clusters[1].name: `llm canary` is not a valid name (letters, digits, `-`, `_`, `.`)",
            "routes[0].match.path_prefix: `v1` must start with `/`",
            "routes[0].split.llm-canary: unknown cluster `llm-canary`",
            "routes[0].sticky.header: `bad header` is not a valid header name",
        ]
    );
}

#[test]
fn yaml_syntax_error_has_a_location() {
    let e = errors_in("listeners: [ { name: a\n");
    assert_eq!(e.len(), 1);
    assert!(e[0].contains("line"), "{e:?}");
}

#[test]
fn mirror_priority_is_idle_unless_set_to_normal() {
    use crate::SidePriority;
    let c = Config::from_yaml(GOOD).unwrap();
    assert_eq!(c.runtime.mirror_priority, SidePriority::Idle);
    let normal = GOOD.replacen("threads: 2", "threads: 2, mirror_priority: normal", 1);
    let c = Config::from_yaml(&normal).unwrap();
    assert_eq!(c.runtime.mirror_priority, SidePriority::Normal);
    let e = errors_of("threads: 2", "threads: 2, mirror_priority: high");
    assert!(
        e[0].starts_with(
            "runtime.mirror_priority: unknown variant `high`, expected `idle` or `normal`"
        ),
        "{e:?}"
    );
}

#[test]
fn upgrade_sock_has_a_default_and_fits_a_unix_socket_path() {
    let c = Config::from_yaml(GOOD).unwrap();
    assert_eq!(
        c.runtime.upgrade_sock,
        std::path::PathBuf::from("/tmp/sluice_upgrade.sock")
    );
    let set = GOOD.replacen(
        "threads: 2",
        "threads: 2, upgrade_sock: /run/sluice/up.sock",
        1,
    );
    let c = Config::from_yaml(&set).unwrap();
    assert_eq!(
        c.runtime.upgrade_sock,
        std::path::PathBuf::from("/run/sluice/up.sock")
    );
    assert_eq!(
        errors_of("threads: 2", "threads: 2, upgrade_sock: \"\""),
        ["runtime.upgrade_sock: must not be empty"]
    );
    let long = format!("threads: 2, upgrade_sock: /{}", "s".repeat(107));
    assert_eq!(
        errors_of("threads: 2", &long),
        ["runtime.upgrade_sock: 108 bytes, over the 107 a Unix socket path may have"]
    );
}

#[test]
fn state_dir_is_unset_unless_given_and_never_empty() {
    let c = Config::from_yaml(GOOD).unwrap();
    assert_eq!(c.runtime.state_dir, None);
    let set = GOOD.replacen("threads: 2", "threads: 2, state_dir: /var/lib/sluice", 1);
    let c = Config::from_yaml(&set).unwrap();
    assert_eq!(
        c.runtime.state_dir,
        Some(std::path::PathBuf::from("/var/lib/sluice"))
    );
    assert_eq!(
        errors_of("threads: 2", "threads: 2, state_dir: \"\""),
        ["runtime.state_dir: must not be empty"]
    );
    let e = errors_of("threads: 2", "threads: 2, state_dir: [a]");
    assert!(
        e[0].starts_with("runtime.state_dir: invalid type: sequence, expected a string"),
        "{e:?}"
    );
    let e = errors_of("threads: 2", "threads: 2, state_file: x");
    assert!(
        e[0].starts_with("runtime.state_file: unknown field `state_file`, expected one of"),
        "{e:?}"
    );
}
