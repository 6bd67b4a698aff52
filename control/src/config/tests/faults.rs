//! `faults:`, `allow_header_faults` and `runtime.max_fault_ttl`: every
//! action read, every shape of a bad experiment, full error texts.

use std::time::Duration;

use sluice_filters::{
    ActionName, Direction, Distribution, FaultAction, GrpcAbort, RequestAction, StreamAction,
    Toxic, TruncateMode,
};

use super::super::*;

const BASE: &str = r#"
runtime: { max_fault_ttl: 10m }
listeners:
  - { name: public, listen: 127.0.0.1:8080, protocol: http }
  - { name: cache, listen: 127.0.0.1:6380, protocol: tcp, cluster: redis }
clusters:
  - { name: llm, kind: llm, endpoints: [127.0.0.1:8000] }
  - { name: redis, kind: cache, endpoints: [127.0.0.1:6379] }
routes:
  - { name: chat, listener: public, split: { llm: 1 }, allow_header_faults: true }
faults:
"#;

fn config(faults: &str) -> Result<Config, ConfigErrors> {
    Config::from_yaml(&format!("{BASE}{faults}"))
}

fn errors_in(faults: &str) -> Vec<String> {
    match config(faults) {
        Ok(_) => Vec::new(),
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
    }
}

fn action_of(action: &str, listener: &str) -> FaultAction {
    let c = config(&format!(
        "  - {{ id: a, ttl: 1m, match: {{ listener: {listener} }}, action: {{ {action} }} }}\n"
    ))
    .unwrap_or_else(|e| panic!("{action}: {e}"));
    c.faults[0].action.clone()
}

#[test]
fn a_full_experiment_is_read() {
    let c = config(
        r#"
  - id: slow-chat
    match: { route: chat, cluster: llm, listener: public, model: gpt, headers: { X-Tenant: a } }
    percent: 25%
    ttl: 5m
    max_active: 3
    halt_if: { error_rate: 20%, window: 30s }
    action: { delay: { delay: 200ms, jitter: 50ms, distribution: lognormal } }
"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let e = &c.faults[0];
    assert_eq!(e.id, "slow-chat");
    assert_eq!(e.percent, 25.0);
    assert_eq!(e.ttl, Duration::from_secs(300));
    assert_eq!(e.max_active, Some(3));
    let halt = e.halt_if.unwrap_or_else(|| panic!("halt_if"));
    assert_eq!(
        (halt.error_rate, halt.window),
        (20.0, Duration::from_secs(30))
    );
    assert_eq!(e.matcher.headers[0].name, "x-tenant");
    assert_eq!(e.matcher.model.as_deref(), Some("gpt"));
    assert_eq!(
        e.action,
        FaultAction::Request(RequestAction::Delay {
            delay: Duration::from_millis(200),
            jitter: Duration::from_millis(50),
            distribution: Distribution::Lognormal,
        })
    );
    assert!(c.routes[0].allow_header_faults);
    assert_eq!(c.runtime.max_fault_ttl, Duration::from_secs(600));
}

#[test]
fn every_action_is_read() {
    let ms = Duration::from_millis;
    let request = [
        (
            "abort: { status: 503 }",
            RequestAction::Abort {
                status: 503,
                body: "fault injected".into(),
                grpc: None,
            },
        ),
        (
            "abort: { grpc_status: 14, message: down for a test }",
            RequestAction::Abort {
                status: 503,
                body: "fault injected".into(),
                grpc: Some(GrpcAbort {
                    status: 14,
                    message: "down for a test".into(),
                }),
            },
        ),
        (
            "abort: { grpc_status: 8, status: 502, body: busy }",
            RequestAction::Abort {
                status: 502,
                body: "busy".into(),
                grpc: Some(GrpcAbort {
                    status: 8,
                    message: "fault injected".into(),
                }),
            },
        ),
        ("reset: {}", RequestAction::Reset),
        ("close: {}", RequestAction::Close),
    ];
    for (text, want) in request {
        assert_eq!(
            action_of(text, "public"),
            FaultAction::Request(want),
            "{text}"
        );
    }
    let stream = [
        (
            "first_token_delay: { delay: 300ms }",
            StreamAction::FirstTokenDelay { delay: ms(300) },
        ),
        (
            "token_delay: { delay: 50ms, jitter: 5ms }",
            StreamAction::TokenDelay {
                delay: ms(50),
                jitter: ms(5),
            },
        ),
        (
            "stall: { after_chunks: 3, duration: 1s }",
            StreamAction::Stall {
                after_chunks: 3,
                duration: ms(1000),
            },
        ),
        (
            "truncate: { after_chunks: 2, mode: abrupt }",
            StreamAction::Truncate {
                after_chunks: 2,
                mode: TruncateMode::Abrupt,
            },
        ),
        ("drop_usage: {}", StreamAction::DropUsage),
        ("drop_done: {}", StreamAction::DropDone),
        (
            "corrupt: { after_chunks: 1 }",
            StreamAction::Corrupt { after_chunks: 1 },
        ),
        (
            "bandwidth: { bytes_per_sec: 100 }",
            StreamAction::Bandwidth { bytes_per_sec: 100 },
        ),
    ];
    for (text, want) in stream {
        assert_eq!(
            action_of(text, "public"),
            FaultAction::Stream(want),
            "{text}"
        );
    }
    let d = Direction::Downstream;
    let tcp = [
        (
            "latency: { latency: 50ms }",
            Toxic::Latency {
                latency: ms(50),
                jitter: ms(0),
                direction: d,
            },
        ),
        (
            "bandwidth: { bytes_per_sec: 1000, direction: upstream }",
            Toxic::Bandwidth {
                bytes_per_sec: 1000,
                direction: Direction::Upstream,
            },
        ),
        (
            "slicer: { average_size: 10, size_variation: 5, delay: 1ms }",
            Toxic::Slicer {
                average_size: 10,
                size_variation: 5,
                delay: ms(1),
                direction: d,
            },
        ),
        (
            "slow_close: { delay: 1s }",
            Toxic::SlowClose { delay: ms(1000) },
        ),
        (
            "timeout: { timeout: 0s }",
            Toxic::Timeout { timeout: ms(0) },
        ),
        (
            "reset_peer: { timeout: 10ms }",
            Toxic::ResetPeer { timeout: ms(10) },
        ),
        (
            "limit_data: { bytes: 64 }",
            Toxic::LimitData {
                bytes: 64,
                direction: d,
            },
        ),
    ];
    for (text, want) in tcp {
        assert_eq!(action_of(text, "cache"), FaultAction::Tcp(want), "{text}");
    }
}

#[test]
fn bad_experiments_report_every_error_with_its_path() {
    assert_eq!(
        errors_in(
            r#"
  - match: { route: nope, cluster: gone, listener: where }
    percent: 150
    max_active: 0
    action: { delay: { delay: 0ms }, abort: { status: 503 } }
  - id: "bad id"
    ttl: 1h
    halt_if: { error_rate: 10%, window: 2m }
    action: { abort: { status: 99 } }
  - { id: t, ttl: 1m, match: { listener: cache, headers: { a: b } }, action: { latency: { latency: 5ms } } }
  - { id: h, ttl: 1m, action: { latency: { latency: 5ms } } }
  - { id: h, ttl: 1m, match: { listener: cache }, action: { reset: {} } }
  - { id: s, ttl: soon, action: {} }
  - { id: u, ttl: 1m, match: { listener: cache }, action: { slicer: { average_size: 4, size_variation: 4, delay: 1ms } } }
"#
        ),
        [
            "faults[0].id: required",
            "faults[0].match.listener: unknown listener `where`",
            "faults[0].match.route: unknown route `nope`",
            "faults[0].match.cluster: unknown cluster `gone`",
            "faults[0].percent: 150 is not within 0..=100",
            "faults[0].ttl: required (how long the experiment may fire, e.g. 5m)",
            "faults[0].max_active: must be at least 1",
            "faults[0].action: exactly one action is required, found delay, abort",
            "faults[1].id: `bad id` is not a valid name (letters, digits, `-`, `_`, `.`)",
            "faults[1].ttl: `1h` is longer than the maximum 10m (runtime.max_fault_ttl)",
            "faults[1].halt_if: needs match.route: the route whose error rate it reads",
            "faults[1].halt_if.window: must be at most 60s",
            "faults[1].action.abort.status: 99 is not an HTTP status from 200 to 599",
            "faults[2].match.headers: a tcp connection has no headers to match",
            "faults[3].action.latency: acts on tcp connections: set match.listener to a tcp listener",
            "faults[4].id: duplicate fault `h` (first at faults[3].id)",
            "faults[4].action.reset: acts on HTTP requests, not on a tcp listener",
            "faults[5].ttl: `soon` is not a duration like 250ms or 1s",
            "faults[5].action: exactly one action is required, found none",
            "faults[6].action.slicer.size_variation: must be less than average_size (4), found 4",
        ]
    );
}

#[test]
fn every_action_name_round_trips_through_the_config() {
    for &name in ActionName::ALL {
        assert_eq!(ActionName::parse(name.as_str()), Ok(name));
        let (body, listener) = match name {
            ActionName::Delay | ActionName::FirstTokenDelay | ActionName::TokenDelay => {
                ("{ delay: 10ms }", "public")
            }
            ActionName::Abort => ("{ status: 503 }", "public"),
            ActionName::Reset
            | ActionName::Close
            | ActionName::DropUsage
            | ActionName::DropDone => ("{}", "public"),
            ActionName::Stall => ("{ duration: 1s }", "public"),
            ActionName::Truncate => ("{ mode: clean }", "public"),
            ActionName::Corrupt => ("{ after_chunks: 2 }", "public"),
            ActionName::Bandwidth => ("{ bytes_per_sec: 100 }", "cache"),
            ActionName::Latency => ("{ latency: 5ms }", "cache"),
            ActionName::Slicer => ("{ average_size: 4, delay: 1ms }", "cache"),
            ActionName::SlowClose => ("{ delay: 5ms }", "cache"),
            ActionName::Timeout | ActionName::ResetPeer => ("{ timeout: 1s }", "cache"),
            ActionName::LimitData => ("{ bytes: 10 }", "cache"),
        };
        let action = format!("{name}: {body}");
        assert_eq!(action_of(&action, listener).action_name(), name);
        // What `GET /v1/config` shows reads back the same.
        let raw = RawFault::from_yaml(&format!("{{ id: a, ttl: 1m, action: {{ {action} }} }}"));
        let raw = raw.unwrap();
        let written = serde_json::to_string(&raw).unwrap();
        assert_eq!(RawFault::from_yaml(&written).unwrap(), raw);
    }
}

#[test]
fn unknown_keys_and_actions_are_refused_with_their_path() {
    let e = errors_in("  - { id: a, ttl: 1m, action: { explode: {} } }\n");
    assert_eq!(e.len(), 1);
    assert!(
        e[0].starts_with(
            "faults[0].action.explode: unknown action `explode` (expected one of delay, abort, \
             reset, close, first_token_delay, token_delay, stall, truncate, drop_usage, \
             drop_done, corrupt, bandwidth, latency, slicer, slow_close, timeout, reset_peer, \
             limit_data) at line"
        ),
        "{e:?}"
    );
    let e = errors_in("  - { id: a, ttl: 1m, action: { abort: { status: 503, code: 1 } } }\n");
    assert!(
        e[0].starts_with(
            "faults[0].action.abort.code: unknown field `code`, expected one of `status`, \
             `body`, `grpc_status`, `message`"
        ),
        "{e:?}"
    );
}

#[test]
fn bad_grpc_aborts_report_every_error() {
    assert_eq!(
        errors_in(
            r#"
  - { id: a, ttl: 1m, action: { abort: { grpc_status: 17, status: 99 } } }
  - { id: b, ttl: 1m, action: { abort: { message: gone } } }
  - { id: c, ttl: 1m, action: { abort: {} } }
"#
        ),
        [
            "faults[0].action.abort.status: 99 is not an HTTP status from 200 to 599",
            "faults[0].action.abort.grpc_status: 17 is not a gRPC status code from 0 to 16",
            "faults[1].action.abort: needs `status` (HTTP), `grpc_status` (gRPC) or both",
            "faults[1].action.abort.message: is the gRPC message: allowed only with grpc_status \
             (use body for HTTP)",
            "faults[2].action.abort: needs `status` (HTTP), `grpc_status` (gRPC) or both",
        ]
    );
}
