//! Token-aware rate limits seen by the official OpenAI Python SDK: a tenant
//! past `total_tokens_per_minute` gets `RateLimitError` with `retry-after`
//! and the `x-ratelimit-*` headers, another tenant is untouched, and what
//! the budgets were charged (reservations, plus long answers' extra, less
//! refunds) is exactly the tokens the upstream's `usage` reported.

use sluice_cli::{MockLlm, MockLlmOptions};

use crate::harness::{self, metric_value, TestConfig};
use crate::support;

const SCRIPT: &str = r#"
import json, sys
import openai

def client(tenant):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{sys.argv[1]}/v1", api_key="x",
                         max_retries=0, timeout=30, default_headers={"x-tenant": tenant})

messages = [{"role": "user", "content": "say something"}]

def call(c):
    raw = c.chat.completions.with_raw_response.create(
        model="mock-llm", messages=messages, stream=True, stream_options={"include_usage": True})
    total = None
    for chunk in raw.parse():
        if chunk.usage is not None:
            total = chunk.usage.total_tokens
    return raw.headers, total

usage_total, answered, limited = 0, 0, None
a = client("a")
for _ in range(40):
    try:
        headers, total = call(a)
        usage_total += total
        answered += 1
    except openai.RateLimitError as e:
        h = e.response.headers
        limited = {
            "status": e.status_code,
            "code": e.code,
            "retry_after": int(h["retry-after"]),
            "retry_after_ms": int(h["retry-after-ms"]),
            "limit_tokens": int(h["x-ratelimit-limit-tokens"]),
            "remaining_tokens": int(h["x-ratelimit-remaining-tokens"]),
            "reset_tokens": h["x-ratelimit-reset-tokens"],
        }
        break

headers, total = call(client("b"))
usage_total += total
print(json.dumps({
    "answered": answered,
    "limited": limited,
    "b_remaining_tokens": int(headers["x-ratelimit-remaining-tokens"]),
    "b_limit_tokens": int(headers["x-ratelimit-limit-tokens"]),
    "usage_total": usage_total,
}))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_past_its_tokens_gets_rate_limit_error_and_others_are_untouched() {
    let Some(python) = support::python() else {
        support::require("python with openai (.venv)", false);
        return;
    };
    // Answers of 40 tokens against a reservation of 8 (the default, the SDK
    // sends no max_tokens): each long answer is charged 32 more when it ends.
    let mock = MockLlm::start(MockLlmOptions::paced_ms(1, 1, 40))
        .await
        .unwrap();
    let sluice = TestConfig::http()
        .cluster_with("llm", "llm", [mock.addr()], "version: v1")
        .route_with(
            "chat",
            "llm: 100",
            "limits: { descriptor: [header:x-tenant], total_tokens_per_minute: 200, \
             default_max_tokens: 8 }",
        )
        .start();
    let port = harness::listener(&sluice, "public").port();

    let mut command = std::process::Command::new(python);
    command.args(["-c", SCRIPT, &port.to_string()]);
    let got = support::run_json(command).await;

    // Tenant a: 200 a minute, each answer ~42 tokens: a handful pass, then 429.
    let answered = got["answered"].as_u64().unwrap();
    assert!((3..=10).contains(&answered), "{got}");
    let limited = &got["limited"];
    assert_eq!(limited["status"], 429, "{got}");
    assert_eq!(limited["code"], "rate_limit_exceeded", "{got}");
    assert_eq!(limited["limit_tokens"], 200, "{got}");
    let retry_ms = limited["retry_after_ms"].as_u64().unwrap();
    assert!((1..=60_000).contains(&retry_ms), "{got}");
    assert_eq!(
        limited["retry_after"].as_u64().unwrap(),
        retry_ms.div_ceil(1000).max(1),
        "{got}"
    );
    // Refused because fewer than the 12 reserved (8 + "say something" / 4) are left.
    assert!(limited["remaining_tokens"].as_u64().unwrap() < 12, "{got}");

    // Tenant b: its own full budget, less its own reservation of 12.
    assert_eq!(got["b_limit_tokens"], 200, "{got}");
    assert_eq!(got["b_remaining_tokens"], 200 - 12, "{got}");

    // Charged less refunded is what the upstream's usage said, to the token.
    let usage_total = got["usage_total"].as_f64().unwrap();
    let labels = [("route", "chat"), ("descriptor", "header:x-tenant")];
    let text = harness::metrics_when(&sluice, |t| {
        metric_value(
            t,
            "sluice_ratelimit_decisions_total",
            &[("result", "allowed")],
        ) == Some(answered as f64 + 1.0)
    })
    .await;
    let charged = metric_value(&text, "sluice_ratelimit_tokens_charged_total", &labels).unwrap();
    let refunded =
        metric_value(&text, "sluice_ratelimit_tokens_refunded_total", &labels).unwrap_or(0.0);
    assert_eq!(charged - refunded, usage_total, "{text}");
    // Long answers: charged beyond their reservations.
    assert!(charged > 12.0 * (answered as f64 + 1.0), "{text}");
    let decisions = |result| {
        let mut l = labels.to_vec();
        l.push(("result", result));
        metric_value(&text, "sluice_ratelimit_decisions_total", &l)
    };
    assert_eq!(decisions("limited"), Some(1.0), "{text}");
}

mod fleet;
