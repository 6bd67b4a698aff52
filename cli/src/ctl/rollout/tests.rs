#![allow(clippy::unwrap_used)]

use serde_json::json;

use super::*;

/// A rollout's status as `GET /v1/rollouts/{name}` answers it.
pub(crate) fn status() -> Value {
    json!({
        "name": "chat-v2", "route": "chat", "stable": "stable", "canary": "canary",
        "state": "progressing", "step": 1, "steps": [50, 100], "weight": 50, "breaches": 0,
        "gates": {
            "ttft_p95": {"gate": "ttft_p95", "value": 120.5, "bound": 150.0, "unit": "ms",
                         "samples": 40, "ok": true},
            "error_rate": {"gate": "error_rate", "value": null, "bound": 1.0, "unit": "%",
                           "samples": 3, "ok": null},
        },
        "events": [{"at_ms": 0, "time_ms": 1_780_000_000_000u64, "from": "pending",
                    "to": "progressing", "step": 1, "weight": 50, "reason": "started"}],
    })
}

#[test]
fn rollout_commands_call_the_endpoints_of_the_table() {
    let call = |command| request(&command).unwrap();
    let name = || "chat-v2".to_string();
    for &c in Command::ALL {
        let command = match c {
            Command::Pause => RolloutCommand::Pause { name: name() },
            Command::Resume => RolloutCommand::Resume { name: name() },
            Command::Promote => RolloutCommand::Promote { name: name() },
            Command::Abort => RolloutCommand::Abort { name: name() },
        };
        let path = format!("/v1/rollouts/chat-v2/{c}");
        assert_eq!(call(command), ("POST", path, None));
    }
    let get = ("GET", "/v1/rollouts".to_string(), None);
    assert_eq!(call(RolloutCommand::List), get);
    let delete = ("DELETE", "/v1/rollouts/chat-v2".to_string(), None);
    assert_eq!(call(RolloutCommand::Delete { name: name() }), delete);
}

#[test]
fn the_list_is_a_row_per_rollout_with_its_gates_summed_up() {
    let mut done = status();
    done["name"] = json!("chat-v1");
    done["state"] = json!("promoted");
    done["step"] = json!(2);
    done["weight"] = json!(100);
    done["gates"] = json!({});
    assert_eq!(
        list(&json!([done, status()]), false),
        "NAME     ROUTE  STABLE  CANARY  STATE        STEP  WEIGHT  BREACHES  GATES\n\
         chat-v1  chat   stable  canary  promoted      2/2    100%         0\n\
         chat-v2  chat   stable  canary  progressing   1/2     50%         0  \
         error_rate n/a vs 1%, ttft_p95 120.5ms<=150ms"
    );
}

#[test]
fn show_is_the_rollout_its_gates_and_its_history() {
    assert_eq!(
        show(&status(), false),
        "name      chat-v2\n\
         route     chat (stable stable, canary canary)\n\
         state     progressing\n\
         step      1/2 (steps 50, 100)\n\
         weight    50%\n\
         breaches  0\n\
         \n\
         GATE        VALUE    BOUND  SAMPLES  VERDICT\n\
         error_rate  n/a         1%        3  not judged\n\
         ttft_p95    120.5ms  150ms       40  ok\n\
         \n\
         TIME                 FROM     TO           STEP  WEIGHT  REASON\n\
         2026-05-28 20:26:40  pending  progressing     1      50  started"
    );
}

#[test]
fn gates_read_in_their_unit_and_a_lower_bound_the_other_way_round() {
    let reading = |value: Value, bound: f64, unit: &str, ok: Value| json!({"value": value, "bound": bound, "unit": unit, "samples": 9, "ok": ok});
    let cases = [
        (
            "ttft_p95",
            reading(json!(400.0), 150.0, "ms", json!(false)),
            "ttft_p95 400ms>150ms",
        ),
        (
            "grpc_success_rate_min",
            reading(json!(97.5), 99.0, "%", json!(false)),
            "grpc_success_rate_min 97.5%<99%",
        ),
        (
            "grpc_success_rate_min",
            reading(json!(99.9), 99.0, "%", json!(true)),
            "grpc_success_rate_min 99.9%>=99%",
        ),
        (
            "cost_per_1k_max",
            reading(json!(0.0213), 0.012, "usd", json!(false)),
            "cost_per_1k_max $0.0213>$0.012",
        ),
        (
            "p99_vs_stable",
            reading(json!(1.25), 1.5, "ratio", json!(true)),
            "p99_vs_stable 1.25<=1.5",
        ),
    ];
    for (name, reading, expected) in cases {
        assert_eq!(gate_summary(name, &reading), expected);
    }
    assert_eq!(verdict(&json!({"ok": false})), "breached");
}

#[test]
fn show_puts_each_steps_coverage_beside_its_error_rate_and_latency() {
    let mut s = status();
    s["step_history"] = json!([
        {"step": 1, "weight": 10, "requests": 12, "error_rate": 0.0, "latency_p99_ms": 8.25,
         "coverage": {"step": 1, "canary_clusters": 2, "clusters_seen": 6,
                      "percent": 33.333333, "prompts": 3}},
        {"step": 2, "weight": 50, "requests": 40},
    ]);
    s["events"] = Value::Null;
    let page = show(&s, false);
    let table = page.split("\n\n").last().unwrap();
    assert_eq!(
        table.lines().collect::<Vec<_>>(),
        [
            "STEP  WEIGHT  REQUESTS  ERRORS     P99  COVERAGE  CLUSTERS",
            "   1     10%        12      0%  8.25ms   33.333%       2/6",
            "   2     50%        40       -       -         -         -",
        ]
    );
}
