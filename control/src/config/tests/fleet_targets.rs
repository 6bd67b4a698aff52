//! `targets: { dns: ... }`, `reconcile_interval` and `fanout`: defaults,
//! every field read, every bad value with its path, and the shape of
//! `targets` told apart (a list, a map, neither).

use std::net::SocketAddr;
use std::time::Duration;

use super::super::*;

const BASE: &str = r#"
listeners:
  - { name: public, listen: 127.0.0.1:8080, protocol: http }
clusters:
  - { name: llm-stable, kind: llm, endpoints: [127.0.0.1:8000] }
  - { name: llm-canary, kind: llm, endpoints: [127.0.0.1:8001] }
routes:
  - { name: chat, listener: public, split: { llm-stable: 100, llm-canary: 0 } }
rollouts:
"#;

/// One rollout with `extra` fields appended inside it.
fn one(extra: &str) -> String {
    format!(
        "{BASE}  - {{ name: chat-v2, route: chat, stable: llm-stable, canary: llm-canary, \
         gates: {{ ttft_p95: 800ms }}{extra} }}\n"
    )
}

fn errors_in(text: &str) -> Vec<String> {
    match Config::from_yaml(text) {
        Ok(_) => panic!("config unexpectedly valid:\n{text}"),
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn dns_targets_take_their_defaults() {
    let c = Config::from_yaml(&one(
        ", targets: { dns: \"sluice-admin.prod.svc.cluster.local:9901\" }",
    ))
    .unwrap();
    let r = &c.rollouts[0];
    assert!(r.is_fleet());
    assert!(r.targets.is_empty());
    let dns = r.discovery.clone().unwrap();
    assert_eq!(
        dns,
        DnsTargets {
            name: "sluice-admin.prod.svc.cluster.local".into(),
            port: 9901,
            resolver: None,
            refresh: Duration::from_secs(10),
        }
    );
    assert_eq!(dns.label(), "sluice-admin.prod.svc.cluster.local:9901");
    assert_eq!(dns.url("10.1.2.3".parse().unwrap()), "http://10.1.2.3:9901");
    assert_eq!(dns.url("fd00::7".parse().unwrap()), "http://[fd00::7]:9901");
    assert_eq!(r.reconcile_interval, Duration::from_secs(5));
    assert_eq!(
        r.fanout,
        Fanout {
            concurrency: 64,
            timeout: Duration::from_secs(2)
        }
    );
}

#[test]
fn every_dns_and_fanout_field_is_read_and_written_back() {
    let text = one(
        ", targets: { dns: \"sluice-admin.test.:9901\", resolver: \"127.0.0.1:5353\", \
         refresh: 1s, scheme: http }, reconcile_interval: 500ms, \
         fanout: { concurrency: 8, timeout: 750ms }",
    );
    let c = Config::from_yaml(&text).unwrap();
    let r = &c.rollouts[0];
    let dns = r.discovery.clone().unwrap();
    // A trailing dot (an absolute name) is the same name.
    assert_eq!(dns.name, "sluice-admin.test");
    assert_eq!(dns.resolver, Some("127.0.0.1:5353".parse().unwrap()));
    assert_eq!(dns.refresh, Duration::from_secs(1));
    assert_eq!(r.reconcile_interval, Duration::from_millis(500));
    assert_eq!(
        r.fanout,
        Fanout {
            concurrency: 8,
            timeout: Duration::from_millis(750)
        }
    );
    let again = Config::from_yaml(&c.raw.to_yaml()).unwrap();
    assert_eq!(again.rollouts, c.rollouts);

    // A resolver without a port is asked on 53.
    let c = Config::from_yaml(&one(
        ", targets: { dns: \"a.b:1\", resolver: \"10.96.0.10\" }",
    ))
    .unwrap();
    let resolver = c.rollouts[0].discovery.as_ref().unwrap().resolver;
    assert_eq!(resolver, Some(SocketAddr::from(([10, 96, 0, 10], 53))));
}

#[test]
fn listed_targets_take_the_reconcile_and_fanout_fields_too() {
    let c = Config::from_yaml(&one(
        ", targets: [\"http://a:9901\"], reconcile_interval: 2s, fanout: { timeout: 1s }",
    ))
    .unwrap();
    let r = &c.rollouts[0];
    assert_eq!(r.targets, ["http://a:9901"]);
    assert_eq!(r.discovery, None);
    assert_eq!(r.reconcile_interval, Duration::from_secs(2));
    assert_eq!(
        r.fanout,
        Fanout {
            concurrency: 64,
            timeout: Duration::from_secs(1)
        }
    );
}

#[test]
fn bad_dns_targets_are_named_by_path() {
    let extra = ", targets: { dns: \"no-port.example\", resolver: \"dns.local\", refresh: 0s, \
                 scheme: https }, reconcile_interval: 5, fanout: { concurrency: 0, timeout: 0s }";
    assert_eq!(
        errors_in(&one(extra)),
        [
            "rollouts[0].targets.dns: `no-port.example` is not NAME:PORT like \
             sluice-admin.prod.svc.cluster.local:9901",
            "rollouts[0].targets.resolver: `dns.local` is not a DNS server address like \
             10.96.0.10:53",
            "rollouts[0].targets.scheme: https is not supported here yet; use http (a trusted \
             network, or a TLS proxy next to it)",
            "rollouts[0].targets.refresh: must be greater than 0",
            "rollouts[0].reconcile_interval: `5` has no unit (use us, ms, s, m or h)",
            "rollouts[0].fanout.concurrency: must be at least 1",
            "rollouts[0].fanout.timeout: must be greater than 0",
        ]
    );
    for (dns, why) in [
        ("svc..cluster:9901", "an empty label"),
        ("svc.cluster:0", "port 0"),
        ("svc.cluster:99999", "a port over 65535"),
        ("svc cluster:9901", "a space"),
    ] {
        assert_eq!(
            errors_in(&one(&format!(", targets: {{ dns: \"{dns}\" }}"))),
            [format!(
                "rollouts[0].targets.dns: `{dns}` is not NAME:PORT like \
                 sluice-admin.prod.svc.cluster.local:9901"
            )],
            "{why}"
        );
    }
    assert_eq!(
        errors_in(&one(", targets: { dns: \"a.b:1\", scheme: gopher }")),
        ["rollouts[0].targets.scheme: unknown scheme `gopher` (expected http)"]
    );
}

#[test]
fn the_shape_of_targets_is_checked_with_its_path() {
    let e = errors_in(&one(", targets: { dns: \"a.b:1\", refreshh: 1s }"));
    assert!(
        e[0].starts_with(
            "rollouts[0].targets.refreshh: unknown field `refreshh`, expected one of `dns`, \
             `resolver`, `refresh`, `scheme`"
        ),
        "{e:?}"
    );
    let e = errors_in(&one(", targets: { resolver: \"127.0.0.1:53\" }"));
    assert!(
        e[0].starts_with("rollouts[0].targets: missing field `dns`"),
        "{e:?}"
    );
    let e = errors_in(&one(", targets: \"http://a:9901\""));
    assert!(
        e[0].starts_with(
            "rollouts[0].targets: invalid type: string \"http://a:9901\", expected a list of \
             control API URLs or a map like { dns: NAME:PORT }"
        ),
        "{e:?}"
    );
    let e = errors_in(&one(", targets: [\"http://a:9901\", [1]]"));
    assert!(
        e[0].starts_with("rollouts[0].targets[1]: invalid type"),
        "{e:?}"
    );
    let e = errors_in(&one(", fanout: { concurency: 4 }"));
    assert!(
        e[0].starts_with("rollouts[0].fanout.concurency: unknown field `concurency`"),
        "{e:?}"
    );
}

#[test]
fn fleet_fields_without_targets_are_refused() {
    assert_eq!(
        errors_in(&one(", reconcile_interval: 1s, fanout: { concurrency: 4 }")),
        [
            "rollouts[0].reconcile_interval: is only read with `targets`",
            "rollouts[0].fanout: is only read with `targets`",
        ]
    );
    // DNS targets are targets: a token variable may go with them.
    let c = Config::from_yaml(&one(
        ", targets: { dns: \"a.b:1\" }, target_token_env: FLEET_TOKEN",
    ))
    .unwrap();
    assert_eq!(c.rollouts[0].target_token_env, "FLEET_TOKEN");
}

#[test]
fn a_fleet_controller_with_dns_targets_needs_no_route_of_its_own() {
    let text = one(", targets: { dns: \"a.b:9901\" }, \
         source: { prometheus: { url: \"http://p:9090\", scrape_interval: 1s } }")
    .replace("route: chat", "route: remote-only");
    let c = Config::from_yaml(&text).unwrap();
    assert_eq!(c.rollouts[0].route, "remote-only");
    // Without the source, the gates are read here: the route must exist.
    assert_eq!(
        errors_in(&one(", targets: { dns: \"a.b:9901\" }").replace("route: chat", "route: x")),
        ["rollouts[0].route: unknown route `x`"]
    );
}
