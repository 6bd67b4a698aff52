#![allow(clippy::unwrap_used)]

use serde_json::json;

use super::*;

#[test]
fn routes_show_their_split_and_sticky_header() {
    let answer = json!([
        {"name": "chat", "listener": "public", "split": {"canary": 5, "stable": 95},
         "sticky": {"header": "x-session-id"}},
        {"name": "embeddings", "listener": "public", "split": {"vec": 100}, "sticky": null},
    ]);
    assert_eq!(
        render(View::Routes, &answer, false),
        "ROUTE       LISTENER  SPLIT               STICKY\n\
         chat        public    canary=5 stable=95  x-session-id\n\
         embeddings  public    vec=100             -"
    );
}

#[test]
fn stats_are_a_row_per_route_and_cluster_with_the_error_rate_in_percent() {
    let answer = json!({"window_seconds": 60, "dropped_samples": 0, "stats": [
        {"route": "chat", "cluster": "stable", "version": "v1", "requests": 1200, "rps": 20.0,
         "errors": 3, "error_rate": 0.0025, "latency_ms": {"p50": 41.2, "p95": 80.0, "p99": 97.3},
         "ttft_ms": {"p50": 10.0, "p95": 12.25, "p99": 14.0}, "output_tokens": 9000,
         "output_tokens_per_second": 150.333333},
        {"route": "chat", "cluster": "canary", "version": "v2", "requests": 7, "rps": 0.117,
         "errors": 0, "error_rate": 0.0, "latency_ms": {"p50": 5.0, "p95": 6.0, "p99": 6.5},
         "output_tokens": 0, "output_tokens_per_second": 0.0},
    ]});
    let shown = render(View::Stats, &answer, false);
    assert_eq!(
        shown.lines().collect::<Vec<_>>(),
        [
            "ROUTE  CLUSTER  VERSION  REQUESTS    RPS  ERRORS  ERROR_RATE  P50_MS  P95_MS  P99_MS  TTFT_P95_MS  TOKENS/S",
            "chat   stable   v1           1200     20       3       0.25%    41.2      80    97.3        12.25   150.333",
            "chat   canary   v2              7  0.117       0          0%       5       6     6.5            -         0",
            "(over the last 60 s; 0 samples dropped)",
        ]
    );
}

#[test]
fn events_show_their_time_in_utc_and_the_errors_of_a_rejected_change() {
    let answer = json!({"events": [
        {"seq": 1, "time_ms": 1_780_000_000_000u64, "source": "startup", "action": "load config",
         "result": "applied", "version": 1},
        {"seq": 2, "time_ms": 1_780_000_060_000u64, "source": "api", "token": "ops",
         "action": "set split of route chat", "result": "rejected", "version": 1,
         "errors": ["routes[0].split.nope: unknown cluster `nope`", "x: y"]},
    ]});
    assert_eq!(
        render(View::Events, &answer, false),
        "SEQ  TIME                 SOURCE   TOKEN  ACTION                   RESULT    VERSION  ERRORS\n\
         \x20 1  2026-05-28 20:26:40  startup  -      load config              applied         1\n\
         \x20 2  2026-05-28 20:27:40  api      ops    set split of route chat  rejected        1  \
         routes[0].split.nope: unknown cluster `nope`; x: y"
    );
    let coloured = render(View::Events, &answer, true);
    assert!(coloured.contains("\x1b[32mapplied\x1b[0m"), "{coloured}");
    assert!(coloured.contains("\x1b[31mrejected\x1b[0m"), "{coloured}");
}

#[test]
fn the_config_is_yaml_under_its_version() {
    let yaml = "listeners:\n  - { name: public, listen: 127.0.0.1:8080, protocol: http }\n\
                clusters:\n  - { name: llm, kind: llm, endpoints: [127.0.0.1:8000] }\n\
                routes:\n  - { name: chat, listener: public, split: { llm: 100 } }\n";
    let raw = sluice_control::RawConfig::from_yaml(yaml).unwrap();
    let answer = json!({"version": 3, "hash": "ab12", "config": raw});
    let shown = render(View::Config, &answer, false);
    let (comment, body) = shown.split_once('\n').unwrap();
    assert_eq!(comment, "# version 3, hash ab12");
    // YAML that reads back as the same config, in the config's own order.
    assert_eq!(sluice_control::RawConfig::from_yaml(body).unwrap(), raw);
    let listeners = body.find("listeners:").unwrap();
    assert!(listeners < body.find("clusters:").unwrap(), "{body}");
    // An answer this build cannot read as a config is still shown, as YAML.
    let other = json!({"version": 4, "hash": "cd34", "config": {"future_key": [1, 2]}});
    assert_eq!(
        render(View::Config, &other, false),
        "# version 4, hash cd34\nfuture_key:\n- 1\n- 2"
    );
}

#[test]
fn faults_show_what_they_match_and_how_much_is_left() {
    let answer = json!({"faults": [
        {"id": "slow", "kind": "token_delay", "state": "active", "percent": 50.0,
         "injected": 12, "active_requests": 1, "time_left_ms": 240000, "time_left": "4m",
         "match": {"route": "chat", "headers": {"x-tenant": "a"}}, "ttl": "5m",
         "action": {"token_delay": {"delay": "50ms"}}},
        {"id": "teapot", "kind": "abort", "state": "expired", "injected": 0,
         "active_requests": 0, "time_left_ms": 0, "time_left": "0s",
         "action": {"abort": {"status": 418}}},
    ]});
    assert_eq!(
        render(View::Faults, &answer, false),
        "ID      ACTION       STATE    PERCENT  INJECTED  ACTIVE  TIME_LEFT  MATCH\n\
         slow    token_delay  active        50        12       1         4m  route=chat headers: x-tenant=a\n\
         teapot  abort        expired        -         0       0         0s  -"
    );
}

#[test]
fn diffs_show_each_pair_and_how_many_were_kept() {
    let answer = json!({"capacity": 256, "total": 9, "diffs": [
        {"seq": 9, "time_ms": 1_780_000_000_000u64, "route": "chat", "request_id": "r9",
         "method": "POST", "path": "/v1/chat", "copy": 0, "kinds": ["status", "text"],
         "similarity": 0.4321, "latency_ratio": 1.5, "request_bytes": 10,
         "request_fingerprint": "f", "primary": {"cluster": "stable", "status": 200},
         "shadow": {"cluster": "shadow", "status": 500}},
    ]});
    assert_eq!(
        render(View::Diffs, &answer, false),
        "SEQ  TIME                 ROUTE  COPY  DIFFERS      SIMILARITY  LATENCY_RATIO  PRIMARY     SHADOW\n\
         \x20 9  2026-05-28 20:26:40  chat      0  status,text       0.432            1.5  stable 200  shadow 500\n\
         (1 shown, newest first; 9 recorded, the last 256 kept)"
    );
}

#[test]
fn other_answers_are_key_value_lines_with_nested_keys_joined_by_dots() {
    let answer = json!({"route": "chat", "split": {"canary": 20, "stable": 80}, "version": 7});
    assert_eq!(
        render(View::Fields, &answer, false),
        "route         chat\nsplit.canary  20\nsplit.stable  80\nversion       7"
    );
    let fault = json!({"id": "x", "state": "halted", "action": {"abort": {"status": 503}},
                       "match": {"headers": {}}, "events": [{"to": "a"}, {"to": "b"}],
                       "kinds": ["status", "text"]});
    assert_eq!(
        render(View::Fields, &fault, false),
        "action.abort.status  503\nevents[0].to         a\nevents[1].to         b\n\
         id                   x\nkinds                status,text\nmatch.headers        {}\n\
         state                halted"
    );
    assert!(render(View::Fields, &fault, true).contains("\x1b[31mhalted\x1b[0m"));
}

#[test]
fn numbers_keep_at_most_three_decimals() {
    assert_eq!(decimals(150.333333), "150.333");
    assert_eq!(decimals(20.0), "20");
    assert_eq!(decimals(0.0004), "0");
    assert_eq!(decimals(-0.0001), "0");
    assert_eq!(text(&json!(-3)), "-3");
    assert_eq!(text(&json!(null)), "-");
}
