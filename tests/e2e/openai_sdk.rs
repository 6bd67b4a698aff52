//! The official OpenAI Python SDK as the client: streaming and whole chat completions
//! through sluice from the mock LLM arrive intact, usage included.

use std::time::Duration;

use sluice_cli::{MockLlm, MockLlmOptions};

use crate::harness;
use crate::support;

const SCRIPT: &str = r#"
import json, sys
import openai

client = openai.OpenAI(base_url=f"http://127.0.0.1:{sys.argv[1]}/v1", api_key="x", max_retries=0, timeout=30)
messages = [{"role": "user", "content": "say something"}]

stream = client.chat.completions.create(
    model="mock-llm", messages=messages, stream=True, stream_options={"include_usage": True}
)
chunks, text, usage, finish = 0, "", None, None
for chunk in stream:
    if chunk.choices:
        choice = chunk.choices[0]
        if choice.delta.content:
            chunks += 1
            text += choice.delta.content
        finish = choice.finish_reason or finish
    if chunk.usage is not None:
        usage = chunk.usage.completion_tokens

whole = client.chat.completions.create(model="mock-llm", messages=messages)
print(json.dumps({
    "chunks": chunks,
    "text": text,
    "completion_tokens": usage,
    "finish": finish,
    "whole_completion_tokens": whole.usage.completion_tokens,
    "whole_prompt_tokens": whole.usage.prompt_tokens,
    "whole_text": whole.choices[0].message.content,
}))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_sdk_streams_through_sluice() {
    let Some(python) = support::python() else {
        support::require("python with openai (.venv)", false);
        return;
    };
    let mock = MockLlm::start(MockLlmOptions::paced_ms(20, 5, 12))
        .await
        .unwrap();
    let sluice = harness::llm_config(mock.addr()).start();
    let port = harness::listener(&sluice, "public").port();

    let mut command = std::process::Command::new(python);
    command.args(["-c", SCRIPT, &port.to_string()]);
    let got = support::run_json(command).await;

    assert_eq!(got["chunks"], 12, "{got}");
    assert_eq!(got["completion_tokens"], 12, "{got}");
    assert_eq!(got["finish"], "stop", "{got}");
    assert!(!got["text"].as_str().unwrap_or("").is_empty(), "{got}");
    assert_eq!(got["whole_completion_tokens"], 12, "{got}");
    assert!(
        got["whole_prompt_tokens"].as_u64().unwrap_or(0) > 0,
        "{got}"
    );
    assert!(
        !got["whole_text"].as_str().unwrap_or("").is_empty(),
        "{got}"
    );

    // Both calls were counted on the route, as 2xx answers from cluster `llm`. The
    // count is bumped when the proxy logs the request, a moment after the client is done.
    let labels = [
        ("route", "chat"),
        ("cluster", "llm"),
        ("status_class", "2xx"),
    ];
    let counted = |text: &str| harness::metric_value(text, "sluice_requests_total", &labels);
    let text = harness::metrics_within(&sluice, Duration::from_secs(10), |t| {
        counted(t) == Some(2.0)
    })
    .await;
    assert_eq!(counted(&text), Some(2.0), "{text}");
}
