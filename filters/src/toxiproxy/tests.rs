#![allow(clippy::unwrap_used)]

use std::time::Duration;

use serde_json::json;

use super::*;

fn err(body: Value) -> String {
    match ToxicSpec::parse(&body) {
        Ok(spec) => format!("parsed: {spec:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn latency_in_milliseconds_with_toxiproxy_defaults() {
    let spec =
        ToxicSpec::parse(&json!({"type": "latency", "attributes": {"latency": 200}})).unwrap();
    assert_eq!(spec.name, "latency_downstream");
    assert_eq!(spec.stream, Direction::Downstream);
    assert_eq!(spec.toxicity, 1.0);
    assert_eq!(spec.percent(), 100.0);
    assert_eq!(
        spec.toxic,
        Toxic::Latency {
            latency: Duration::from_millis(200),
            jitter: Duration::ZERO,
            direction: Direction::Downstream,
        }
    );
    assert_eq!(
        spec.to_json(),
        json!({"name": "latency_downstream", "type": "latency", "stream": "downstream",
               "toxicity": 1.0, "attributes": {"latency": 200, "jitter": 0}})
    );
}

#[test]
fn each_type_maps_with_its_units() {
    let cases = [
        (
            json!({"type": "bandwidth", "stream": "upstream", "attributes": {"rate": 64}}),
            Toxic::Bandwidth {
                bytes_per_sec: 64_000,
                direction: Direction::Upstream,
            },
        ),
        (
            json!({"type": "slicer", "attributes": {"average_size": 64, "size_variation": 32, "delay": 10}}),
            Toxic::Slicer {
                average_size: 64,
                size_variation: 32,
                delay: Duration::from_micros(10),
                direction: Direction::Downstream,
            },
        ),
        (
            json!({"type": "slow_close", "attributes": {"delay": 1500}}),
            Toxic::SlowClose {
                delay: Duration::from_millis(1500),
            },
        ),
        (
            json!({"type": "timeout", "attributes": {"timeout": 0}}),
            Toxic::Timeout {
                timeout: Duration::ZERO,
            },
        ),
        (
            json!({"type": "reset_peer", "attributes": {"timeout": 250}}),
            Toxic::ResetPeer {
                timeout: Duration::from_millis(250),
            },
        ),
        (
            json!({"type": "limit_data", "stream": "upstream", "attributes": {"bytes": 1024}}),
            Toxic::LimitData {
                bytes: 1024,
                direction: Direction::Upstream,
            },
        ),
    ];
    for (body, want) in cases {
        let spec = ToxicSpec::parse(&body).unwrap();
        assert_eq!(spec.toxic, want, "{body}");
    }
}

#[test]
fn name_stream_and_toxicity_as_given() {
    let spec = ToxicSpec::parse(
        &json!({"name": "slow", "type": "latency", "stream": "upstream",
        "toxicity": 0.25, "attributes": {"latency": 5, "jitter": 2}}),
    )
    .unwrap();
    assert_eq!(spec.name, "slow");
    assert_eq!(spec.percent(), 25.0);
    assert_eq!(
        spec.toxic,
        Toxic::Latency {
            latency: Duration::from_millis(5),
            jitter: Duration::from_millis(2),
            direction: Direction::Upstream,
        }
    );
}

#[test]
fn errors_name_the_field() {
    let cases = [
        (json!([]), "body: must be a JSON object"),
        (json!({"attributes": {}}), "type: required"),
        (
            json!({"type": "jam"}),
            "type: unknown toxic type `jam` (latency, bandwidth, slicer, slow_close, timeout, reset_peer, limit_data)",
        ),
        (
            json!({"type": "latency", "stream": "sideways", "attributes": {"latency": 1}}),
            "stream: must be `upstream` or `downstream`, found \"sideways\"",
        ),
        (
            json!({"type": "latency", "toxicity": 1.5, "attributes": {"latency": 1}}),
            "toxicity: must be a number from 0 to 1, found 1.5",
        ),
        (
            json!({"type": "latency", "attributes": {"latency": -3}}),
            "attributes.latency: must be a whole number of at least 0, found -3",
        ),
        (
            json!({"type": "latency", "attributes": {"rate": 3}}),
            "attributes.rate: not an attribute of latency (latency, jitter)",
        ),
        (
            json!({"type": "latency"}),
            "attributes.latency: must be at least 1 (milliseconds)",
        ),
        (
            json!({"type": "bandwidth", "attributes": {"rate": 0}}),
            "attributes.rate: must be at least 1 (KB/s)",
        ),
        (
            json!({"type": "slicer", "attributes": {"average_size": 8, "size_variation": 8}}),
            "attributes.size_variation: must be less than average_size (8), found 8",
        ),
        (
            json!({"name": "a b", "type": "timeout"}),
            "name: `a b` is not a valid name (letters, digits, `-`, `_`, `.`)",
        ),
        (
            json!({"type": "timeout", "ttl": "1s"}),
            "ttl: unknown field (name, type, stream, toxicity, attributes)",
        ),
    ];
    for (body, want) in cases {
        assert_eq!(err(body.clone()), want, "{body}");
    }
}

#[test]
fn an_update_merges_attributes_and_toxicity_only() {
    let spec = ToxicSpec::parse(
        &json!({"name": "l", "type": "latency", "attributes": {"latency": 100, "jitter": 10}}),
    )
    .unwrap();
    let next = spec
        .updated(&json!({"attributes": {"latency": 300}, "toxicity": 0.5, "stream": "upstream"}))
        .unwrap();
    assert_eq!(next.name, "l");
    assert_eq!(next.stream, Direction::Downstream);
    assert_eq!(next.percent(), 50.0);
    assert_eq!(
        next.toxic,
        Toxic::Latency {
            latency: Duration::from_millis(300),
            jitter: Duration::from_millis(10),
            direction: Direction::Downstream,
        }
    );
    assert_eq!(
        spec.updated(&json!({"attributes": {"latency": 0}}))
            .unwrap_err()
            .to_string(),
        "attributes.latency: must be at least 1 (milliseconds)"
    );
}

#[test]
fn proxies_need_name_listen_and_upstream() {
    let p = ProxySpec::parse(
        &json!({"name": "redis", "listen": "localhost:26379", "upstream": "127.0.0.1:6379"}),
    )
    .unwrap();
    assert_eq!(
        p,
        ProxySpec {
            name: "redis".into(),
            listen: "localhost:26379".into(),
            upstream: "127.0.0.1:6379".into(),
            enabled: true,
        }
    );
    let disabled = ProxySpec::parse(
        &json!({"name": "r", "listen": "127.0.0.1:0", "upstream": "h:1", "enabled": false}),
    )
    .unwrap();
    assert!(!disabled.enabled);
    let anywhere = ProxySpec::parse(&json!({"name": "r", "upstream": "h:1"})).unwrap();
    assert_eq!(anywhere.listen, "127.0.0.1:0");
    let cases = [
        (
            json!({"listen": "a:1", "upstream": "b:2"}),
            "name: required",
        ),
        (json!({"name": "r", "listen": "a:1"}), "upstream: required"),
        (
            json!({"name": "r", "listen": "a:1", "upstream": "nowhere"}),
            "upstream: `nowhere` is not host:port",
        ),
        (
            json!({"name": "r", "listen": "a:1", "upstream": "b:2", "enabled": "no"}),
            "enabled: must be true or false, found \"no\"",
        ),
        (
            json!({"name": "r/s", "listen": "a:1", "upstream": "b:2"}),
            "name: `r/s` is not a valid name (letters, digits, `-`, `_`, `.`)",
        ),
    ];
    for (body, want) in cases {
        assert_eq!(
            ProxySpec::parse(&body).unwrap_err().to_string(),
            want,
            "{body}"
        );
    }
}

#[test]
fn a_patch_keeps_what_it_does_not_name() {
    let patch =
        ProxyPatch::parse(&json!({"name": "redis", "enabled": false, "toxics": []})).unwrap();
    assert_eq!(
        patch,
        ProxyPatch {
            listen: None,
            upstream: None,
            enabled: Some(false),
        }
    );
    assert_eq!(
        ProxyPatch::parse(&json!({"listen": "x"}))
            .unwrap_err()
            .to_string(),
        "listen: `x` is not host:port"
    );
}
