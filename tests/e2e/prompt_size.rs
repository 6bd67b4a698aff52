//! `prompt.input_tokens` against a real tokenizer: prompts that
//! `sluice_workload::sized_prompt` pads to a token count, sent to llama.cpp
//! serving SmolLM2-135M, whose `usage.prompt_tokens` must be near the target
//! once the chat template's own tokens are taken off.

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Value};
use sluice_workload::sized_prompt;

use crate::llama_cpp::LlamaServer;
use crate::support::{python, require};

/// The server's prompt tokens for one user message.
async fn prompt_tokens(client: &reqwest::Client, url: &str, content: &str) -> u64 {
    let body = json!({
        "model": "smollm2",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 1,
    });
    let answer: Value = client
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    answer["usage"]["prompt_tokens"]
        .as_u64()
        .unwrap_or_else(|| panic!("no usage in {answer}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sized_prompts_have_about_their_target_tokens_in_a_real_tokenizer() {
    let Some(py) = python() else {
        require("the .venv python with xllamacpp", false);
        return;
    };
    let server = tokio::task::spawn_blocking(move || LlamaServer::start_with(&py, None))
        .await
        .unwrap();
    let url = format!("http://127.0.0.1:{}/v1/chat/completions", server.port);
    let client = reqwest::Client::new();
    // What the chat template adds around any message: a one-word one,
    // less its word.
    let overhead = prompt_tokens(&client, &url, "the").await - 1;
    let text = "Context: doc-17 doc-42 Question: how does an open loop measure latency?";
    let mut rng = StdRng::seed_from_u64(5);
    // The server's context is 2048 tokens over 2 slots.
    for target in [100u64, 300, 900] {
        let prompt = sized_prompt(text, target, &mut rng);
        let seen = prompt_tokens(&client, &url, &prompt).await - overhead;
        let ratio = seen as f64 / target as f64;
        eprintln!("input_tokens {target}: SmolLM2 counted {seen} (+{overhead} of chat template), ratio {ratio:.3}");
        assert!(
            (ratio - 1.0).abs() <= 0.15,
            "target {target}: the server counted {seen}"
        );
    }
    drop(server);
}
