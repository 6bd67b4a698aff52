//! `listeners[].limits`: the defaults, the values read, and every error
//! with its path.

use std::time::Duration;

use super::*;

const PUBLIC: &str = "{ name: public, listen: 127.0.0.1:8080, protocol: http }";

fn with_limits(limits: &str) -> String {
    GOOD.replacen(
        PUBLIC,
        &format!("{{ name: public, listen: 127.0.0.1:8080, protocol: http, limits: {limits} }}"),
        1,
    )
}

#[test]
fn limits_default_to_envoy_like_values_and_read_sizes_and_durations() {
    let c = Config::from_yaml(GOOD).unwrap();
    let d = c.listeners[0].limits;
    assert_eq!(d, ListenerLimits::default());
    assert_eq!(
        (d.head.max_header_bytes, d.head.max_uri_bytes),
        (64 << 10, 8 << 10)
    );
    assert_eq!(
        (d.header_timeout, d.idle_timeout),
        (Duration::from_secs(10), Duration::from_secs(60))
    );
    let text = with_limits(
        "{ max_header_bytes: 32KiB, max_uri_bytes: 2048, header_timeout: 2s, idle_timeout: 500ms, max_connections: 10 }",
    );
    let l = Config::from_yaml(&text).unwrap().listeners[0].limits;
    assert_eq!(
        (l.head.max_header_bytes, l.head.max_uri_bytes),
        (32 << 10, 2048)
    );
    assert_eq!(
        (l.header_timeout, l.idle_timeout, l.max_connections),
        (Duration::from_secs(2), Duration::from_millis(500), 10)
    );
}

#[test]
fn every_bad_limit_is_named_with_its_path() {
    assert_eq!(
        errors_in(&with_limits(
            "{ max_header_bytes: 2MiB, max_uri_bytes: 0, header_timeout: soon, max_connections: 0 }"
        )),
        [
            "listeners[0].limits.max_uri_bytes: 0 bytes is not within 1 ..= 64KiB",
            "listeners[0].limits.max_header_bytes: 2097152 bytes is not within 1 ..= 960KiB",
            "listeners[0].limits.header_timeout: `soon` is not a duration like 250ms or 1s",
            "listeners[0].limits.max_connections: must be at least 1",
        ]
    );
    assert_eq!(
        errors_in(&with_limits("{ max_body: 1MiB }")),
        [
            "listeners[0].limits.max_body: unknown field `max_body`, expected one of \
          `max_header_bytes`, `max_uri_bytes`, `header_timeout`, `idle_timeout`, \
          `max_connections` at line 5 column 71"
        ]
    );
}
