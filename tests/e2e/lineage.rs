//! Lineage end to end: a real sluice whose canary cluster declares its
//! dataset and checkpoint, a real rollout of it (started by the controller,
//! promoted by the operator), a real `sluice load` run through it and a
//! `sluice report` of the run; then `sluice lineage` walks, from the files
//! and the live control API, dataset → checkpoint → cluster v2 → rollout →
//! event, and scenario (+ cluster v2) → run → report. Two sluices of the
//! same config give the same cluster, rollout and event ids; two runs of the
//! same scenario against the same target the same run and report ids.
//!
//! To add a link (the feedback scenario below a rollout event, a run below
//! it), extend [`Chain`]'s paths: `sluice lineage` follows `parents`
//! whatever their kind.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_cli::{MockLlm, MockLlmOptions};
use sluice_proxy::Sluice;

use crate::cli::sluice as sluice_cli_run;
use crate::harness::{listener, start, Admin, TestConfig};
use crate::support::TempDir;

const LINEAGE: &str = "lineage: { dataset: \"s3://data/chat@v3\", \
     checkpoint: \"hf://org/llama@3f2a\", api_version: 3.2.1 }";

fn config(stable: &MockLlm, canary: &MockLlm) -> String {
    TestConfig::http()
        .cluster_with("llm-stable", "llm", [stable.addr()], "version: v1.4.2")
        .cluster_with(
            "llm-canary",
            "llm",
            [canary.addr()],
            &format!("version: v2.0.0, {LINEAGE}"),
        )
        .route("chat", "llm-stable: 100, llm-canary: 0")
        .section(
            "rollouts",
            "\n  - { name: chat-v2, route: chat, stable: llm-stable, canary: llm-canary, \
             steps: [50, 100], hold: 1h, min_requests: 5, interval: 50ms, window: 2s, \
             gates: { error_rate: 5% } }",
        )
        .yaml()
}

/// A sluice with the rollout started by its controller and promoted by the
/// operator: every answer from then on is the canary's.
async fn promoted(stable: &MockLlm, canary: &MockLlm) -> Sluice {
    let sluice = start(&config(stable, canary));
    let admin = Admin::new(&sluice);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, status) = admin.get("/v1/rollouts/chat-v2").await;
        if status["state"] == "progressing" && status["weight"] == 50 {
            break;
        }
        assert!(Instant::now() < deadline, "not progressing: {status}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (code, status) = admin.post("/v1/rollouts/chat-v2/promote", "").await;
    assert_eq!(code, 200, "{status}");
    assert_eq!(status["state"], "promoted", "{status}");
    sluice
}

/// `sluice ARGS` that must succeed; its stdout.
async fn ok(args: &[&str]) -> String {
    let out = sluice_cli_run(args.iter().map(|a| (*a).to_owned()).collect()).await;
    assert!(
        out.status.success(),
        "sluice {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A load run of `scenario` and its report, with their artefacts in `dir`;
/// the run's and the report's ids.
async fn run_and_report(scenario: &Path, work: &Path, dir: &str) -> (String, String) {
    let run = work.join("run.json");
    let report = work.join("report.json");
    let (run_s, report_s) = (run.display().to_string(), report.display().to_string());
    let scenario = scenario.display().to_string();
    ok(&["load", &scenario, "-o", &run_s, "--lineage-dir", dir]).await;
    ok(&[
        "report",
        &run_s,
        "--json",
        "-o",
        &report_s,
        "--lineage-dir",
        dir,
    ])
    .await;
    let read = |p: &Path| -> Value { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
    let (run, report) = (read(&run), read(&report));
    let run_id = run["lineage"]["id"].as_str().unwrap().to_owned();
    assert_eq!(report["lineage"]["id"], run_id.as_str(), "{report}");
    assert_eq!(report["parents"], serde_json::json!([run_id]), "{report}");
    (run_id, report["id"].as_str().unwrap().to_owned())
}

/// A walk's nodes and edges (`sluice lineage --json`).
pub(crate) struct Chain(Value);

impl Chain {
    fn node(&self, id: &str) -> &Value {
        self.0["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == id)
            .unwrap_or_else(|| panic!("no node {id} in {:#}", self.0))
    }

    fn ids_of(&self, kind: &str) -> Vec<String> {
        self.0["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["kind"] == kind)
            .map(|n| n["id"].as_str().unwrap().to_owned())
            .collect()
    }

    fn edge(&self, from: &str, to: &str) -> bool {
        self.0["edges"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["from"] == from && e["to"] == to)
    }

    /// The ids of one path whose nodes have `kinds` in order, each an edge
    /// from the one before; panics naming the kinds when there is none.
    pub(crate) fn path(&self, kinds: &[&str]) -> Vec<String> {
        fn extend(chain: &Chain, kinds: &[&str], path: &mut Vec<String>) -> bool {
            let Some((kind, rest)) = kinds.split_first() else {
                return true;
            };
            for id in chain.ids_of(kind) {
                if path.last().is_some_and(|p| !chain.edge(p, &id)) {
                    continue;
                }
                path.push(id);
                if extend(chain, rest, path) {
                    return true;
                }
                path.pop();
            }
            false
        }
        let mut path = Vec::new();
        assert!(
            extend(self, kinds, &mut path),
            "no path {kinds:?} in {:#}",
            self.0
        );
        path
    }
}

pub(crate) async fn walk(id: &str, dir: &str, sluice: &Sluice) -> Chain {
    let admin = format!("http://{}", sluice.admin_addr);
    let text = ok(&[
        "lineage",
        id,
        "--json",
        "--dir",
        dir,
        "--admin",
        &admin,
        "--token",
        &sluice.token,
    ])
    .await;
    Chain(serde_json::from_str(&text).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_walks_back_to_its_dataset_and_the_same_inputs_give_the_same_ids() {
    let stable = MockLlm::start(MockLlmOptions::paced_ms(5, 1, 3))
        .await
        .unwrap();
    let canary = MockLlm::start(MockLlmOptions::paced_ms(5, 1, 3))
        .await
        .unwrap();
    let sluice = promoted(&stable, &canary).await;
    let work = TempDir::new("lineage");
    let dir = work.path().join("lineage").display().to_string();
    let scenario = work.write(
        "chat.yaml",
        &format!(
            "scenario: chat\ntarget: {{ base_url: \"http://{}\" }}\n\
             workload: {{ arrival: {{ kind: constant, rate: 20 }}, duration: 1s, seed: 3 }}\n\
             steps:\n  - {{ name: answer, service: llm, prompt: {{ template: hi }}, max_tokens: 3 }}\n",
            listener(&sluice, "public")
        ),
    );
    let (run_id, report_id) = run_and_report(&scenario, work.path(), &dir).await;

    // From the report: the run, its scenario, and the canary version it
    // measured, up to the checkpoint and the dataset.
    let up = walk(&report_id, &dir, &sluice).await;
    assert_eq!(up.0["root"], report_id.as_str());
    let model = up.path(&["dataset", "checkpoint", "cluster", "load_run", "report"]);
    assert_eq!(model[3..], [run_id.clone(), report_id.clone()]);
    let cluster = model[2].clone();
    assert_eq!(up.node(&cluster)["label"], "llm-canary");
    assert_eq!(up.node(&model[0])["label"], "s3://data/chat@v3");
    assert_eq!(up.node(&model[1])["label"], "hf://org/llama@3f2a");
    up.path(&["scenario", "load_run", "report"]);
    assert_eq!(up.0["missing"], serde_json::json!([]));

    // From the canary version: its rollout and the rollout's events, live.
    let down = walk(&cluster, &dir, &sluice).await;
    let rollout = down.path(&[
        "dataset",
        "checkpoint",
        "cluster",
        "rollout",
        "rollout_event",
    ]);
    assert_eq!(down.node(&rollout[3])["label"], "chat-v2");
    let events = Admin::new(&sluice).get("/v1/rollouts/chat-v2").await.1["events"].clone();
    let event_ids: Vec<String> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e["lineage"]["rollout"], rollout[3].as_str(), "{e}");
            e["lineage"]["id"].as_str().unwrap().to_owned()
        })
        .collect();
    assert!(event_ids.len() >= 2, "{events}");
    for id in &event_ids {
        assert!(down.edge(&rollout[3], id), "{id} is not below the rollout");
    }
    // The audit log's entry of each transition names it.
    let audit = Admin::new(&sluice).get("/v1/events").await.1;
    let promotion = audit["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["lineage"]["rollout_event"] == event_ids.last().unwrap().as_str())
        .unwrap_or_else(|| panic!("no audit entry of the promotion: {audit}"));
    assert_eq!(promotion["lineage"]["rollout"], rollout[3].as_str());

    // The same scenario against the same target: the same run and report.
    let again = TempDir::new("lineage-again");
    let again_dir = again.path().join("lineage").display().to_string();
    let (run_again, report_again) = run_and_report(&scenario, again.path(), &again_dir).await;
    assert_eq!((run_again, report_again), (run_id, report_id.clone()));

    // The same config in another sluice: the same cluster, rollout and
    // event ids (the config's own id differs: its listeners' ports do).
    let other = promoted(&stable, &canary).await;
    let (_, live) = Admin::new(&other).get("/v1/lineage").await;
    let ids: Vec<&str> = live["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    for id in rollout.iter().chain(&event_ids) {
        assert!(ids.contains(&id.as_str()), "{id} not in {live}");
    }
    let (code, one) = Admin::new(&other)
        .get(&format!("/v1/lineage/{}", rollout[3]))
        .await;
    assert_eq!((code, &one["kind"]), (200, &serde_json::json!("rollout")));

    // The tree for people, and an id nobody has.
    let tree = ok(&["lineage", &report_id, "--dir", &dir]).await;
    assert!(
        tree.starts_with(&format!("report {report_id}  report.json\nmade from:\n")),
        "{tree}"
    );
    let unknown = sluice_cli_run(vec![
        "lineage".into(),
        "0000000000000000".into(),
        "--dir".into(),
        dir.clone(),
    ])
    .await;
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&unknown.stderr)
            .contains("lineage: no artefact `0000000000000000` in "),
        "{}",
        String::from_utf8_lossy(&unknown.stderr)
    );
}
