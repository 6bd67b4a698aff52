//! `rollouts:` and `allow_version_header`: defaults, every shape of a bad
//! rollout, full error texts.

use std::time::Duration;

use super::super::*;

const BASE: &str = r#"
listeners:
  - { name: public, listen: 127.0.0.1:8080, protocol: http }
clusters:
  - { name: llm-stable, kind: llm, version: v1, endpoints: [127.0.0.1:8000] }
  - { name: llm-canary, kind: llm, version: v2, endpoints: [127.0.0.1:8001],
      cost: { gpu_hour: 2.5 } }
  - { name: other, kind: llm, endpoints: [127.0.0.1:8002] }
routes:
  - name: chat
    listener: public
    match: { path_prefix: /v1/ }
    split: { llm-stable: 100, llm-canary: 0 }
    allow_version_header: true
  - { name: embed, listener: public, split: { other: 1 } }
rollouts:
"#;

const FULL: &str = r#"
  - name: chat-v2
    route: chat
    stable: llm-stable
    canary: llm-canary
    steps: [1, 10, 100]
    hold: 1m
    min_requests: 50
    interval: 100ms
    window: 2.5s
    consecutive: 3
    on_breach: pause
    gates:
      ttft_p95: 800ms
      ttft_p99: 2s
      itl_p99: 150ms
      tpot_p95: 40ms
      latency_p99: 30s
      error_rate: 1%
      p99_vs_stable: 1.25
      ttft_vs_stable: 1.5
      gpu_memory_max: 90
      upstream_queue_max: 8
    source:
      prometheus:
        url: http://127.0.0.1:9090/
        scrape_interval: 500ms
        queries: { ttft_p95: "histogram_quantile(0.95, x)" }
    targets: [http://sluice-1.internal:9901, "http://sluice-2.internal:9901/"]
    target_token_env: FLEET_TOKEN
"#;

/// One minimal rollout with `extra` fields appended inside it.
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
fn defaults_fill_a_minimal_rollout() {
    let c = Config::from_yaml(&one("")).unwrap();
    let r = &c.rollouts[0];
    assert_eq!(r.steps, [1, 5, 20, 50, 100]);
    assert_eq!(r.hold, Duration::from_secs(30));
    assert_eq!(r.min_requests, 100);
    assert_eq!(r.interval, Duration::from_millis(250));
    assert_eq!(r.window, Duration::from_secs(10));
    assert_eq!(r.consecutive, 2);
    assert_eq!(r.on_breach, OnBreach::Rollback);
    assert_eq!(r.gates.bounds(), [(Gate::TtftP95, 800.0)]);
    assert_eq!(r.source, None);
    assert!(r.targets.is_empty());
    assert!(c.routes[0].allow_version_header);
    assert!(!c.routes[1].allow_version_header);
}

#[test]
fn every_field_is_read() {
    let c = Config::from_yaml(&format!("{BASE}{FULL}")).unwrap();
    let r = &c.rollouts[0];
    assert_eq!(r.steps, [1, 10, 100]);
    assert_eq!(r.hold, Duration::from_secs(60));
    assert_eq!((r.min_requests, r.consecutive), (50, 3));
    assert_eq!(r.interval, Duration::from_millis(100));
    // Windows are whole seconds: 2.5s reads as 3s.
    assert_eq!(r.window, Duration::from_secs(3));
    assert_eq!(r.on_breach, OnBreach::Pause);
    assert_eq!(
        r.gates.bounds(),
        [
            (Gate::TtftP95, 800.0),
            (Gate::TtftP99, 2000.0),
            (Gate::GapP99, 150.0),
            (Gate::TpotP95, 40.0),
            (Gate::LatencyP99, 30_000.0),
            (Gate::ErrorRate, 1.0),
            (Gate::P99VsStable, 1.25),
            (Gate::TtftVsStable, 1.5),
            (Gate::GpuMemoryMax, 90.0),
            (Gate::UpstreamQueueMax, 8.0),
        ]
    );
    let RolloutSource::Prometheus {
        url,
        scrape_interval,
        queries,
    } = r.source.clone().unwrap();
    assert_eq!(scrape_interval, Duration::from_millis(500));
    assert_eq!(url, "http://127.0.0.1:9090");
    assert_eq!(
        queries[&QueryKey::Gate(Gate::TtftP95)],
        "histogram_quantile(0.95, x)"
    );
    assert_eq!(
        r.targets,
        [
            "http://sluice-1.internal:9901",
            "http://sluice-2.internal:9901"
        ]
    );
    assert_eq!(r.target_token_env, "FLEET_TOKEN");
    // What was written round-trips (`itl_p99` is kept as `gap_p99`).
    let again = Config::from_yaml(&c.raw.to_yaml()).unwrap();
    assert_eq!(again.rollouts, c.rollouts);
    assert!(c.raw.to_yaml().contains("gap_p99: 150ms"));
}

#[test]
fn references_to_the_route_and_its_split() {
    assert_eq!(
        errors_in(&one("").replace("route: chat", "route: chta")),
        ["rollouts[0].route: unknown route `chta`"]
    );
    assert_eq!(
        errors_in(&one("").replace("canary: llm-canary", "canary: other")),
        ["rollouts[0].canary: cluster `other` is not in the split of route `chat`"]
    );
    assert_eq!(
        errors_in(&one("").replace("canary: llm-canary", "canary: llm-stable")),
        ["rollouts[0].canary: must differ from stable (`llm-stable`)"]
    );
}

#[test]
fn names_are_unique_and_a_route_has_one_rollout() {
    let two = format!(
        "{}  - {{ name: chat-v2, route: chat, stable: llm-stable, canary: llm-canary, \
         gates: {{ error_rate: 1 }} }}\n",
        one("")
    );
    assert_eq!(
        errors_in(&two),
        [
            "rollouts[1].name: duplicate rollout `chat-v2` (first at rollouts[0].name)",
            "rollouts[1].route: route `chat` already has rollout `chat-v2` (rollouts[0])",
        ]
    );
    assert_eq!(
        errors_in(&one("").replace("name: chat-v2", "name: \"chat v2\"")),
        ["rollouts[0].name: `chat v2` is not a valid name (letters, digits, `-`, `_`, `.`)"]
    );
}

#[test]
fn bad_steps() {
    assert_eq!(
        errors_in(&one(", steps: []")),
        ["rollouts[0].steps: at least one step is required"]
    );
    assert_eq!(
        errors_in(&one(", steps: [0, 20, 20, 10, 101, 100]")),
        [
            "rollouts[0].steps[0]: 0 is not within 1..=100",
            "rollouts[0].steps[2]: 20 must be greater than the step before (20)",
            "rollouts[0].steps[3]: 10 must be greater than the step before (20)",
            "rollouts[0].steps[4]: 101 is not within 1..=100",
            "rollouts[0].steps[5]: 100 must be greater than the step before (101)",
        ]
    );
    assert_eq!(
        errors_in(&one(", steps: [5, 50]")),
        ["rollouts[0].steps: the last step must be 100, found 50"]
    );
    let e = errors_in(&one(", steps: [-1, 100]"));
    assert!(
        e[0].starts_with("rollouts[0].steps[0]: invalid type: integer `-1`, expected u32"),
        "{e:?}"
    );
}

#[test]
fn bad_timing_and_counts() {
    assert_eq!(
        errors_in(&one(
            ", hold: 0s, interval: soon, window: 90s, min_requests: 0, consecutive: 0"
        )),
        [
            "rollouts[0].hold: must be greater than 0",
            "rollouts[0].min_requests: must be at least 1",
            "rollouts[0].interval: `soon` is not a duration like 250ms or 1s",
            "rollouts[0].window: 90s is over the 60s maximum",
            "rollouts[0].consecutive: must be at least 1",
        ]
    );
    let e = errors_in(&one(", on_breach: panic"));
    assert!(
        e[0].starts_with(
            "rollouts[0].on_breach: unknown variant `panic`, expected `rollback` or `pause`"
        ),
        "{e:?}"
    );
}

#[test]
fn every_gate_name_round_trips_through_the_config() {
    for &gate in Gate::ALL {
        assert_eq!(Gate::parse(gate.as_str()), Ok(gate));
        let bound = match gate.unit() {
            Unit::Ms => "20ms",
            Unit::Percent => "5%",
            // A similarity's bound is at most 1.
            Unit::Ratio => "0.5",
            Unit::Requests => "3",
            Unit::Usd => "$0.012",
        };
        // The mirror's gates read the route's mirror of the canary,
        // embedded, and no more pairs than its window keeps.
        let extra = if gate.reads_the_mirror() {
            ", min_requests: 5"
        } else {
            ""
        };
        let mut yaml = one(extra).replace("ttft_p95: 800ms", &format!("{gate}: {bound}"));
        // `min_coverage` reads the clusters of the route's prompts.
        if gate.reads_the_mirror() || gate == Gate::MinCoverage {
            yaml = yaml.replace(
                "    allow_version_header: true\n",
                "    allow_version_header: true\n    mirror: { cluster: llm-canary, \
                     copies: 2, stability: true, \
                     compare: { embeddings: { cluster: other, coverage: {} } } }\n",
            );
        }
        let config = Config::from_yaml(&yaml).unwrap();
        let bounds = config.rollouts[0].gates.bounds();
        assert_eq!(bounds.len(), 1);
        assert_eq!(bounds[0].0, gate);
        // What `GET /v1/config` shows reads back the same.
        let written = serde_json::to_string(&config.raw).unwrap();
        assert_eq!(RawConfig::from_yaml(&written).unwrap(), config.raw);
    }
    assert_eq!(Gate::parse("itl_p99"), Ok(Gate::GapP99));
}

#[test]
fn bad_gates() {
    assert_eq!(
        errors_in(&one("").replace("gates: { ttft_p95: 800ms }", "gates: {}")),
        ["rollouts[0].gates: at least one gate is required"]
    );
    assert_eq!(
        errors_in(&one("").replace("gates: { ttft_p95: 800ms }", "hold: 30s")),
        ["rollouts[0].gates: at least one gate is required"]
    );
    let bad = "gates: { ttft_p95: 0ms, gap_p99: 1 sec, error_rate: 150%, \
               p99_vs_stable: 0, ttft_vs_stable: -2, gpu_memory_max: lots }";
    assert_eq!(
        errors_in(&one("").replace("gates: { ttft_p95: 800ms }", bad)),
        [
            "rollouts[0].gates.ttft_p95: must be greater than 0",
            "rollouts[0].gates.gap_p99: `1 sec` has unknown unit ` sec` (use us, ms, s, m or h)",
            "rollouts[0].gates.error_rate: 150 is not within 0..=100",
            "rollouts[0].gates.p99_vs_stable: must be greater than 0, found 0",
            "rollouts[0].gates.ttft_vs_stable: must be greater than 0, found -2",
            "rollouts[0].gates.gpu_memory_max: `lots` is not a percent like 1% or 0.5%",
        ]
    );
    let e = errors_in(&one("").replace("ttft_p95: 800ms", "ttft_p95: 800ms, ttft_p50: 1s"));
    assert!(
        e[0].starts_with(
            "rollouts[0].gates.ttft_p50: unknown gate `ttft_p50` (expected one of ttft_p95, \
             ttft_p99, gap_p99, tpot_p95, latency_p99, error_rate, p99_vs_stable, \
             ttft_vs_stable, gpu_memory_max, upstream_queue_max, cost_per_1k_max, \
             grpc_success_rate_min, embedding_similarity_p10_min, embedding_drift_kl_max, answer_dispersion_max, min_coverage) at line"
        ),
        "{e:?}"
    );
    let e = errors_in(&one("").replace("ttft_p95: 800ms", "gap_p99: 1s, itl_p99: 2s"));
    assert!(
        e[0].starts_with("rollouts[0].gates: gate `gap_p99` is set twice"),
        "{e:?}"
    );
    assert_eq!(
        errors_in(&one("").replace("ttft_p95: 800ms", "ttft_p95: 800")),
        ["rollouts[0].gates.ttft_p95: `800` has no unit (use us, ms, s, m or h)"]
    );
    let e = errors_in(&one("").replace("ttft_p95: 800ms", "error_rate: [1]"));
    assert!(
        e[0].starts_with(
            "rollouts[0].gates.error_rate: invalid type: sequence, \
             expected a percent like 1% or a number from 0 to 100"
        ),
        "{e:?}"
    );
}

#[test]
fn bad_fleet_fields() {
    let extra =
        ", targets: [\"sluice-9.internal:9901\", \"ftp://x\", \"https://b:9901\", \"http://c:1\", \
                 \"http://c:1/\"], target_token_env: 1TOKEN, \
                 source: { prometheus: { url: \"localhost:9090\", scrape_interval: 0s, \
                 queries: { ttft_p96: x, error_rate: \" \", requests: \"sum(x)\" } } }";
    assert_eq!(
        errors_in(&one(extra)),
        [
            "rollouts[0].source.prometheus.queries.error_rate: must not be empty",
            "rollouts[0].source.prometheus.queries.ttft_p96: unknown query `ttft_p96` \
             (expected one of ttft_p95, ttft_p99, gap_p99, tpot_p95, latency_p99, error_rate, \
             p99_vs_stable, ttft_vs_stable, gpu_memory_max, upstream_queue_max, cost_per_1k_max, \
             grpc_success_rate_min, embedding_similarity_p10_min, embedding_drift_kl_max, answer_dispersion_max, min_coverage, requests)",
            "rollouts[0].source.prometheus.url: `localhost:9090` is not an http URL like \
             http://127.0.0.1:9090",
            "rollouts[0].source.prometheus.scrape_interval: must be greater than 0",
            "rollouts[0].targets[0]: `sluice-9.internal:9901` is not an http URL like \
             http://sluice-2.internal:9901",
            "rollouts[0].targets[1]: `ftp://x` is not an http URL like http://sluice-2.internal:9901",
            "rollouts[0].targets[2]: `https://b:9901`: https is not supported here yet; use \
             http:// (a trusted network, or a TLS proxy next to it)",
            "rollouts[0].targets[4]: duplicate target `http://c:1` (first at rollouts[0].targets[3])",
            "rollouts[0].target_token_env: `1TOKEN` is not an environment variable name \
             (letters, digits, `_`)",
        ]
    );
    assert_eq!(
        errors_in(&one(", target_token_env: TOKEN")),
        ["rollouts[0].target_token_env: is only read with `targets`"]
    );
}

#[test]
fn a_prometheus_source_sets_the_timing_from_its_scrape_interval() {
    let c = Config::from_yaml(&one(
        ", source: { prometheus: { url: \"http://127.0.0.1:9090\" } }",
    ))
    .unwrap();
    let r = &c.rollouts[0];
    // Four of Prometheus's default 15s scrapes; one evaluation per scrape.
    assert_eq!(r.window, Duration::from_secs(60));
    assert_eq!(r.interval, Duration::from_secs(15));
    assert!(r.targets.is_empty());
    assert_eq!(r.target_token_env, "SLUICE_ADMIN_TOKEN");

    let c = Config::from_yaml(&one(", window: 10m, interval: 1s, \
         source: { prometheus: { url: \"http://p:9090\", scrape_interval: 1s } }"))
    .unwrap();
    assert_eq!(c.rollouts[0].window, Duration::from_secs(600));
    assert_eq!(c.rollouts[0].interval, Duration::from_secs(1));

    let short =
        ", window: 3s, source: { prometheus: { url: \"http://p:9090\", scrape_interval: 1s } }";
    assert_eq!(
        errors_in(&one(short)),
        [
            "rollouts[0].window: 3s is under 4 × source.prometheus.scrape_interval (1s): rate() \
             needs at least two scrapes in the window; use 4s or more"
        ]
    );
    let long = ", window: 2h, source: { prometheus: { url: \"http://p:9090\" } }";
    assert_eq!(
        errors_in(&one(long)),
        ["rollouts[0].window: 2h is over the 3600s maximum"]
    );
}

#[test]
fn a_fleet_controller_needs_no_route_of_its_own() {
    let fleet = ", targets: [\"http://sluice-2.internal:9901\"], \
                 source: { prometheus: { url: \"http://p:9090\", scrape_interval: 1s } }";
    let text = one(fleet).replace("route: chat", "route: remote-only");
    let c = Config::from_yaml(&text).unwrap();
    assert_eq!(c.rollouts[0].route, "remote-only");
    // Still one rollout per route, and two different clusters.
    assert_eq!(
        errors_in(&text.replace("canary: llm-canary", "canary: llm-stable")),
        ["rollouts[0].canary: must differ from stable (`llm-stable`)"]
    );
    // Either half alone reads or writes this instance: the route must be here.
    for half in [
        ", targets: [\"http://sluice-2.internal:9901\"]",
        ", source: { prometheus: { url: \"http://p:9090\" } }",
    ] {
        assert_eq!(
            errors_in(&one(half).replace("route: chat", "route: remote-only")),
            ["rollouts[0].route: unknown route `remote-only`"]
        );
    }
}

#[test]
fn every_rollout_error_is_reported_at_once() {
    let text = format!(
        "{BASE}  - {{ name: a, route: nope, stable: x, canary: x, steps: [50], \
         gates: {{ error_rate: 101 }} }}\n  - {{ name: b, route: embed, stable: other, \
         canary: llm-canary, gates: {{ upstream_queue_max: 4 }}, window: 61s }}\n"
    );
    assert_eq!(
        errors_in(&text),
        [
            "rollouts[0].route: unknown route `nope`",
            "rollouts[0].canary: must differ from stable (`x`)",
            "rollouts[0].steps: the last step must be 100, found 50",
            "rollouts[0].gates.error_rate: 101 is not within 0..=100",
            "rollouts[1].canary: cluster `llm-canary` is not in the split of route `embed`",
            "rollouts[1].window: 61s is over the 60s maximum",
        ]
    );
}

#[test]
fn exclude_load_is_read_checked_and_written_back() {
    let c = Config::from_yaml(&one("")).unwrap();
    assert!(
        !c.rollouts[0].gates.exclude_load,
        "load traffic counts by default"
    );
    let yaml = one("").replace("ttft_p95: 800ms", "ttft_p95: 800ms, exclude_load: true");
    let c = Config::from_yaml(&yaml).unwrap();
    let r = &c.rollouts[0];
    assert!(r.gates.exclude_load);
    // Not a gate: only the bounds are judged.
    assert_eq!(r.gates.bounds(), [(Gate::TtftP95, 800.0)]);
    let again = Config::from_yaml(&c.raw.to_yaml()).unwrap();
    assert!(again.rollouts[0].gates.exclude_load);
    assert_eq!(again.raw, c.raw);
    let c = Config::from_yaml(
        &one("").replace("ttft_p95: 800ms", "ttft_p95: 800ms, exclude_load: false"),
    )
    .unwrap();
    assert!(!c.rollouts[0].gates.exclude_load);

    assert_eq!(
        errors_in(&one("").replace("ttft_p95: 800ms", "exclude_load: true")),
        ["rollouts[0].gates: at least one gate is required"]
    );
    let e = errors_in(&one("").replace("ttft_p95: 800ms", "ttft_p95: 800ms, exclude_load: yes"));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with(
            "rollouts[0].gates.exclude_load: invalid type: string \"yes\", expected a boolean"
        ),
        "{e:?}"
    );
}

#[test]
fn on_restart_continues_unless_told_to_pause() {
    let c = Config::from_yaml(&one("")).unwrap();
    assert_eq!(c.rollouts[0].on_restart, OnRestart::Continue);
    let c = Config::from_yaml(&one(", on_restart: pause")).unwrap();
    assert_eq!(c.rollouts[0].on_restart, OnRestart::Pause);
    let c = Config::from_yaml(&one(", on_restart: continue")).unwrap();
    assert_eq!(c.rollouts[0].on_restart, OnRestart::Continue);
    assert_eq!(
        errors_in(&one(", on_restart: resume")),
        ["rollouts[0].on_restart: unknown variant `resume`, expected `continue` or `pause` at line 17 column 115"]
    );
}

#[test]
fn grpc_success_rate_and_its_failure_codes() {
    let c = Config::from_yaml(&one("").replace("ttft_p95: 800ms", "grpc_success_rate_min: 99.5%"))
        .unwrap();
    let g = &c.rollouts[0].gates;
    assert_eq!(g.bounds(), [(Gate::GrpcSuccessRateMin, 99.5)]);
    assert_eq!(
        g.grpc_failures.codes().collect::<Vec<_>>(),
        [2, 4, 8, 13, 14],
        "the default failure codes"
    );
    let yaml = one("").replace(
        "ttft_p95: 800ms",
        "grpc_success_rate_min: 95, grpc_failure_codes: [14, 5]",
    );
    let c = Config::from_yaml(&yaml).unwrap();
    assert_eq!(
        c.rollouts[0]
            .gates
            .grpc_failures
            .codes()
            .collect::<Vec<_>>(),
        [5, 14]
    );
    let again = Config::from_yaml(&c.raw.to_yaml()).unwrap();
    assert_eq!(again.raw, c.raw);

    let bad = "gates: { grpc_success_rate_min: 101, ttft_p95: 1s, grpc_failure_codes: [14, 17] }";
    assert_eq!(
        errors_in(&one("").replace("gates: { ttft_p95: 800ms }", bad)),
        [
            "rollouts[0].gates.grpc_success_rate_min: 101 is not within 0..=100",
            "rollouts[0].gates.grpc_failure_codes[1]: 17 is not a gRPC status code from 0 to 16",
        ]
    );
    assert_eq!(
        errors_in(&one("").replace("ttft_p95: 800ms", "ttft_p95: 1s, grpc_failure_codes: []")),
        [
            "rollouts[0].gates.grpc_failure_codes: read only by grpc_success_rate_min, which is \
             not set",
            "rollouts[0].gates.grpc_failure_codes: lists no code: every call would count as a \
             success",
        ]
    );
}
