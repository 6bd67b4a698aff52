//! `context_sweep` against the real llama.cpp server (SmolLM2-135M) with one
//! slot of 512 tokens: prompts from 128 to 1024 tokens in 4 stages. The
//! stages past 512 are refused by the server (`exceed_context_size_error`),
//! counted as errors and truncations, and the sweep's `context_limit` marks
//! the first of them; `sluice report` shows the table. With `to: auto` the
//! sweep ends at the context the server reports (`GET /props`).

use serde_json::Value;
use sluice_workload::SweepResult;

use crate::cli::sluice;
use crate::llama_cpp::LlamaServer;
use crate::support::{python, require, TempDir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_sweep_marks_llama_cpps_context_limit() {
    let Some(py) = python() else {
        require("the .venv python with xllamacpp", false);
        return;
    };
    let server = tokio::task::spawn_blocking(move || LlamaServer::start_with_context(&py, 512))
        .await
        .unwrap();
    let dir = TempDir::new("context-sweep");
    // One request a stage (every 4 s), its prompt sized to the stage's
    // length; `prefix: shared` lets each stage's prompt reuse the cached
    // start of the one before (a CPU prefill is slow).
    let scenario = dir.path().join("sweep.yaml");
    std::fs::write(
        &scenario,
        format!(
            "scenario: context-sweep\n\
             target: {{ base_url: 'http://127.0.0.1:{}' }}\n\
             workload: {{ arrival: {{ kind: constant, rate: 0.25 }}, duration: 16s, seed: 5 }}\n\
             steps:\n\
             \x20 - {{ name: chat, service: llm, prompt: {{ template: 'Say hi.', input_tokens: 128, prefix: shared }},\n\
             \x20     max_tokens: 8, stream: true, timeout: 120s }}\n\
             context_sweep: {{ from: 128, to: 1024, steps: 4 }}\n",
            server.port
        ),
    )
    .unwrap();
    let run = dir.path().join("run.json");
    let out = sluice(vec![
        "load".into(),
        scenario.display().to_string(),
        "--detailed".into(),
        "-o".into(),
        run.display().to_string(),
    ])
    .await;
    // The refused stages fail their requests: the run itself completes.
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&std::fs::read(&run).unwrap()).unwrap();
    let sweep: SweepResult = serde_json::from_value(result["context_sweep"].clone()).unwrap();
    eprint!("{}", sweep.table());

    let lengths: Vec<u64> = sweep.stages.iter().map(|s| s.input_tokens).collect();
    assert_eq!(lengths, [128, 427, 725, 1024]);
    // Within the context: answered, none cut.
    for s in &sweep.stages[..2] {
        assert_eq!((s.errors, s.truncations), (0, 0), "{s:?}");
        assert!(s.p50_ttft_ms.is_some(), "{s:?}");
    }
    // Past it: every request refused, and the refusal read as the context's.
    for s in &sweep.stages[2..] {
        assert!(s.requests > 0, "{s:?}");
        assert_eq!(s.errors, s.requests, "{s:?}");
        assert_eq!(s.truncations, s.requests, "{s:?}");
    }
    let limit = sweep.context_limit.as_ref().unwrap();
    assert_eq!((limit.stage, limit.input_tokens), (2, 725));
    // The rows say why: a 400 and `truncated`.
    let rows = result["requests"].as_array().unwrap();
    let refused: Vec<&Value> = rows.iter().filter(|r| r["stage"] == 2).collect();
    assert!(refused
        .iter()
        .all(|r| r["status"] == 400 && r["truncated"] == true));

    // The report shows the table and marks the limit.
    let page = dir.path().join("report.html");
    let out = sluice(vec![
        "report".into(),
        run.display().to_string(),
        "-o".into(),
        page.display().to_string(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("context limit: 725 input tokens (stage 2: truncations)"),
        "{stderr}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("Context limit: 725 input tokens"),
        "no banner"
    );
    assert!(html.contains("◀ limit"), "no marked row");

    // `to: auto`: the sweep ends at the server's own context size.
    let props: Value = reqwest::get(format!("http://127.0.0.1:{}/props", server.port))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let n_ctx = props["default_generation_settings"]["n_ctx"]
        .as_u64()
        .unwrap();
    assert_eq!(n_ctx, 512, "{props}");
    let auto = dir.path().join("auto.yaml");
    let scenario_text = |port: u16| {
        format!(
            "scenario: context-sweep-auto\n\
             target: {{ base_url: 'http://127.0.0.1:{port}' }}\n\
             workload: {{ arrival: {{ kind: constant, rate: 0.25 }}, duration: 8s, seed: 5 }}\n\
             steps:\n\
             \x20 - {{ name: chat, service: llm, prompt: {{ template: 'Say hi.', input_tokens: 128, prefix: shared }},\n\
             \x20     max_tokens: 8, stream: true, timeout: 120s }}\n\
             context_sweep: {{ from: 128, to: auto, steps: 2 }}\n"
        )
    };
    std::fs::write(&auto, scenario_text(server.port)).unwrap();
    let run = dir.path().join("auto.json");
    let out = sluice(vec![
        "load".into(),
        auto.display().to_string(),
        "-o".into(),
        run.display().to_string(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("load: context_sweep.to: auto = 512 tokens (GET /props)"),
        "{stderr}"
    );
    let result: Value = serde_json::from_slice(&std::fs::read(&run).unwrap()).unwrap();
    let sweep: SweepResult = serde_json::from_value(result["context_sweep"].clone()).unwrap();
    assert_eq!(sweep.to, n_ctx);
    let lengths: Vec<u64> = sweep.stages.iter().map(|s| s.input_tokens).collect();
    assert_eq!(lengths, [128, n_ctx]);

    // A target that answers neither question: refused before the run,
    // naming the key.
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = nobody.local_addr().unwrap().port();
    drop(nobody);
    std::fs::write(&auto, scenario_text(closed)).unwrap();
    let out = sluice(vec!["load".into(), auto.display().to_string()]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "context_sweep.to: auto: http://127.0.0.1:{closed} gave no context size (GET /props: "
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("give context_sweep.to as a number of tokens"),
        "{stderr}"
    );
}
