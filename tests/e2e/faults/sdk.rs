//! The official OpenAI Python SDK as the client of faulted streams: an
//! abrupt truncation makes it raise; a clean one ends its loop quietly.

use serde_json::{json, Value};

use super::add;
use super::stream::{llm_yaml, mock};
use crate::harness::{listener, start, Admin};
use crate::support;

const SCRIPT: &str = r#"
import json, sys
import openai

client = openai.OpenAI(base_url=f"http://127.0.0.1:{sys.argv[1]}/v1", api_key="x", max_retries=0, timeout=30)
chunks, error = 0, None
try:
    stream = client.chat.completions.create(
        model="mock-llm", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            chunks += 1
except Exception as e:
    error = type(e).__name__
print(json.dumps({"chunks": chunks, "error": error}))
"#;

async fn run_sdk(port: u16) -> Value {
    let python = support::python().expect("checked by the caller");
    let mut command = std::process::Command::new(python);
    command.args(["-c", SCRIPT, &port.to_string()]);
    support::run_json(command).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_raises_on_an_abrupt_truncation() {
    if support::python().is_none() {
        support::require("python with openai (.venv)", false);
        return;
    }
    let mock = mock(10, 5, 10).await;
    let sluice = start(&llm_yaml(&mock));
    let admin = Admin::new(&sluice);
    let port = listener(&sluice, "public").port();
    let id = add(
        &admin,
        json!({"id": "cut", "ttl": "5m", "action": {"truncate": {"after_chunks": 4, "mode": "abrupt"}}}),
    )
    .await;
    let got = run_sdk(port).await;
    assert_eq!(got["chunks"], 4, "{got}");
    assert!(got["error"].is_string(), "the SDK must raise: {got}");
    admin.delete(&format!("/v1/faults/{id}")).await;

    add(
        &admin,
        json!({"id": "end", "ttl": "5m", "action": {"truncate": {"after_chunks": 4, "mode": "clean"}}}),
    )
    .await;
    let got = run_sdk(port).await;
    assert_eq!(got, json!({"chunks": 4, "error": null}));
}
