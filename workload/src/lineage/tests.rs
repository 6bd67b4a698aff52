#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use sluice_filters::{Artifact, ArtifactKind, ContentId};

use super::*;
use crate::load::{summarize, Goodput, Lineage, ReplayRun, RunInfo, RunOutput, Scenario, Seen};

const SCENARIO: &str = "scenario: chat\n\
target: { base_url: 'http://127.0.0.1:9' }\n\
workload: { arrival: { kind: constant, rate: 5 }, duration: 2s, seed: 7 }\n\
steps: [ { name: ask, service: llm, prompt: hi } ]\n";

#[test]
fn a_scenario_is_identified_by_its_parsed_content() {
    let a = scenario_artifact("chat.yaml", SCENARIO, None).unwrap();
    // The same document with comments, other spacing and key order.
    let same = "# a comment\n\
                steps: [{prompt: hi, service: llm, name: ask}]\n\
                workload: {seed: 7, duration: 2s, arrival: {rate: 5, kind: constant}}\n\
                target:   { base_url: \"http://127.0.0.1:9\" }\nscenario: chat\n";
    let b = scenario_artifact("other-name.yaml", same, None).unwrap();
    assert_eq!(a.id, b.id);
    assert_eq!(a.kind, ArtifactKind::Scenario);
    let faster = scenario_artifact("chat.yaml", &SCENARIO.replace("rate: 5", "rate: 6"), None);
    assert_ne!(faster.unwrap().id, a.id);
    // A scenario from a model sits below the model, and a new model moves it.
    let m1 = model_artifact("m.yaml", "v: 1\narrival: { kind: exponential, rate: 2 }\n").unwrap();
    let m2 = model_artifact("m.yaml", "v: 1\narrival: { kind: exponential, rate: 3 }\n").unwrap();
    assert_ne!(m1.id, m2.id);
    let under = scenario_artifact("chat.yaml", SCENARIO, Some(m1.id.clone())).unwrap();
    assert_eq!(under.parents, vec![m1.id.clone()]);
    assert_ne!(under.id, a.id);
    assert_ne!(
        scenario_artifact("chat.yaml", SCENARIO, Some(m2.id))
            .unwrap()
            .id,
        under.id
    );
    assert_eq!(
        scenario_artifact("x", "a: [1", None).unwrap_err(),
        "did not find expected ',' or ']' at line 2 column 1, while parsing a flow sequence at \
         line 1 column 4"
    );
}

/// The report of a run of [`SCENARIO`] that sent nothing, with `seen`
/// naming the cluster version `cluster_id`.
fn run_report(cluster_id: Option<&str>) -> RunReport {
    let scenario = Scenario::from_yaml(SCENARIO, std::path::Path::new("."), &|_| None).unwrap();
    let output = RunOutput {
        outcomes: Vec::new(),
        closed: None,
        journeys: 0,
        span_us: 2_000_000,
        ran_us: 2_000_000,
        queued: 0,
        cut_in_flight: 0,
        cut_waiting: 0,
        elapsed: std::time::Duration::from_secs(2),
        interrupted: false,
        setup: Vec::new(),
        teardown: Vec::new(),
    };
    let info = RunInfo {
        run_id: "load-1".into(),
        shard: "0/1".into(),
        started_at: "2026-01-01T00:00:00Z".into(),
        lineage: Lineage {
            scenario_sha256: "ab".repeat(32),
            target: "http://127.0.0.1:8080".into(),
            sluice_version: "0.1.0".into(),
            from_model: None,
            id: None,
            parents: Vec::new(),
        },
        goodput: Goodput::default(),
        detailed: false,
    };
    let mut r = summarize(&scenario, &output, info);
    r.seen = vec![Seen {
        step: "ask".into(),
        cluster: Some("llm-canary".into()),
        version: Some("v2.0.0".into()),
        model: None,
        lineage_id: cluster_id.map(str::to_owned),
        requests: 10,
    }];
    r
}

#[test]
fn a_run_is_identified_by_what_it_sent_not_what_came_back() {
    let scenario = scenario_artifact("chat.yaml", SCENARIO, None).unwrap().id;
    let cluster = "0123456789abcdef";
    let a = run_artifact(&run_report(Some(cluster)), &scenario, Vec::new());
    let mut parents = vec![scenario.clone(), ContentId::parse(cluster).unwrap()];
    parents.sort();
    assert_eq!(a.parents, parents);
    assert_eq!(a.kind, ArtifactKind::LoadRun);

    // Another run id, start time, results and counts: the same id.
    let mut later = run_report(Some(cluster));
    later.run_id = "load-ffff".into();
    later.started_at = "2030-01-01T00:00:00Z".into();
    later.passed = !later.passed;
    later.seen[0].requests = 999;
    later.lineage.scenario_sha256 = "cd".repeat(32);
    assert_eq!(run_artifact(&later, &scenario, Vec::new()).id, a.id);

    // What is sent, or what answered, changes it.
    let mut seed = run_report(Some(cluster));
    seed.seed += 1;
    assert_ne!(run_artifact(&seed, &scenario, Vec::new()).id, a.id);
    let mut shard = run_report(Some(cluster));
    shard.shard = "1/2".into();
    assert_ne!(run_artifact(&shard, &scenario, Vec::new()).id, a.id);
    let mut target = run_report(Some(cluster));
    target.lineage.target = "http://127.0.0.1:8081".into();
    assert_ne!(run_artifact(&target, &scenario, Vec::new()).id, a.id);
    let mut closed = run_report(Some(cluster));
    (closed.mode, closed.users) = ("closed", Some(4));
    assert_ne!(run_artifact(&closed, &scenario, Vec::new()).id, a.id);
    let mut replay = run_report(Some(cluster));
    replay.replay = Some(ReplayRun {
        file: "t.jsonl".into(),
        trace_sha256: "00".repeat(32),
        speed: 2.0,
        from: None,
        to: None,
        sample: None,
        recorded_requests: 5,
        planned_requests: 5,
        planned_journeys: 5,
    });
    assert_ne!(run_artifact(&replay, &scenario, Vec::new()).id, a.id);
    let other_model = run_artifact(&run_report(Some("fedcba9876543210")), &scenario, vec![]);
    assert_ne!(other_model.id, a.id);
    let bare = run_artifact(&run_report(None), &scenario, Vec::new());
    assert_eq!(bare.parents, vec![scenario.clone()]);
    // A feedback artefact the run mixed in is one more parent.
    let feedback = ContentId::parse("aaaaaaaaaaaaaaaa").unwrap();
    let fed = run_artifact(
        &run_report(Some(cluster)),
        &scenario,
        vec![feedback.clone()],
    );
    assert!(fed.parents.contains(&feedback));
    assert_ne!(fed.id, a.id);
}

#[test]
fn capacity_runs_and_reports_sit_below_what_they_read() {
    let scenario = scenario_artifact("chat.yaml", SCENARIO, None).unwrap().id;
    let search = json!({"sla": [["ttft_p95", 800.0]], "stage": "20s"});
    let a = capacity_artifact("chat", &scenario, "http://x", 1, search.clone(), vec![]);
    assert_eq!(a.kind, ArtifactKind::CapacityRun);
    assert_eq!(a.parents, vec![scenario.clone()]);
    assert_eq!(
        capacity_artifact("again", &scenario, "http://x", 1, search.clone(), vec![]).id,
        a.id
    );
    assert_ne!(
        capacity_artifact("chat", &scenario, "http://x", 2, search.clone(), vec![]).id,
        a.id
    );
    let tighter = json!({"sla": [["ttft_p95", 500.0]], "stage": "20s"});
    assert_ne!(
        capacity_artifact("chat", &scenario, "http://x", 1, tighter, vec![]).id,
        a.id
    );

    let run = ContentId::parse("1111111111111111").unwrap();
    let base = ContentId::parse("2222222222222222").unwrap();
    let options = json!({"metrics": ["p99_ttft_ms"], "min_change_pct": 5.0});
    let r = report_artifact("report.html", Some(&run), Some(&base), options.clone());
    assert_eq!(r.parents, vec![run.clone(), base.clone()]);
    assert_eq!(
        report_artifact("report.json", Some(&run), Some(&base), options.clone()).id,
        r.id
    );
    assert_ne!(
        report_artifact("r", Some(&run), None, options.clone()).id,
        r.id
    );
    assert_ne!(
        report_artifact("r", Some(&base), Some(&run), options).id,
        r.id
    );
}

/// dataset → checkpoint → cluster → rollout → event, scenario → run →
/// report (the run below the cluster too).
fn fixture() -> Vec<Artifact> {
    let dataset = Artifact::new(ArtifactKind::Dataset, "s3://d@v3", json!({"d": 1}), vec![]);
    let ckpt = Artifact::new(
        ArtifactKind::Checkpoint,
        "hf://m@3f2a",
        json!({"c": 1}),
        vec![dataset.id.clone()],
    );
    let cluster = Artifact::new(
        ArtifactKind::Cluster,
        "llm-canary",
        json!({"v": 2}),
        vec![ckpt.id.clone()],
    );
    let rollout = Artifact::new(
        ArtifactKind::Rollout,
        "chat-v2",
        json!({"r": 1}),
        vec![cluster.id.clone()],
    );
    let event = |seq: u64| {
        Artifact::new(
            ArtifactKind::RolloutEvent,
            format!("e{seq}"),
            json!({"seq": seq}),
            vec![rollout.id.clone()],
        )
    };
    let scenario = Artifact::new(ArtifactKind::Scenario, "chat.yaml", json!({"s": 1}), vec![]);
    let run = Artifact::new(
        ArtifactKind::LoadRun,
        "chat",
        json!({"seed": 1}),
        vec![scenario.id.clone(), cluster.id.clone()],
    );
    let report = Artifact::new(
        ArtifactKind::Report,
        "report.html",
        json!({}),
        vec![run.id.clone()],
    );
    vec![
        dataset,
        ckpt,
        cluster,
        rollout.clone(),
        event(1),
        event(0),
        scenario,
        run,
        report,
    ]
}

#[test]
fn a_walk_from_a_report_finds_everything_it_came_from() {
    let all = fixture();
    let g = Graph::new(all.clone());
    let report = &all[8];
    let walk = g.walk(&report.id).unwrap();
    let id = |i: usize| all[i].id.as_str().to_owned();
    assert_eq!(
        walk.tree(),
        format!(
            "report {r}  report.html\n\
             made from:\n\
             \x20 load_run {run}  chat\n\
             \x20   cluster {c}  llm-canary\n\
             \x20     checkpoint {k}  hf://m@3f2a\n\
             \x20       dataset {d}  s3://d@v3\n\
             \x20   scenario {s}  chat.yaml\n\
             made into:\n\
             \x20 (nothing)\n",
            r = id(8),
            run = id(7),
            c = id(2),
            k = id(1),
            d = id(0),
            s = id(6)
        )
    );
    let j = walk.json();
    assert_eq!(j["root"], json!(id(8)));
    let mut kinds: Vec<&str> = j["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["kind"].as_str().unwrap())
        .collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        [
            "checkpoint",
            "cluster",
            "dataset",
            "load_run",
            "report",
            "scenario"
        ]
    );
    let mut edges: Vec<(String, String)> = j["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["from"].as_str().unwrap().into(),
                e["to"].as_str().unwrap().into(),
            )
        })
        .collect();
    edges.sort();
    let mut want = vec![
        (id(0), id(1)),
        (id(1), id(2)),
        (id(2), id(7)),
        (id(6), id(7)),
        (id(7), id(8)),
    ];
    want.sort();
    assert_eq!(edges, want);
    assert_eq!(j["missing"], json!([]));

    // From the cluster: up to the dataset, down to the rollout, its events
    // in order, the run and the report.
    let down = g.walk(&all[2].id).unwrap().tree();
    let made_into = down.split("made into:\n").nth(1).unwrap();
    assert_eq!(
        made_into,
        format!(
            "  load_run {run}  chat\n\
             \x20   report {r}  report.html\n\
             \x20 rollout {ro}  chat-v2\n\
             \x20   rollout_event {e0}  e0\n\
             \x20   rollout_event {e1}  e1\n",
            run = id(7),
            r = id(8),
            ro = id(3),
            e0 = id(5),
            e1 = id(4)
        )
    );
}

#[test]
fn the_whole_graph_as_a_tree_and_as_graphviz() {
    let all = fixture();
    let g = Graph::new(all.clone());
    let tree = g.all().tree();
    let id = |i: usize| all[i].id.as_str().to_owned();
    // The run has two parents: it is drawn once, and named again as (above).
    assert_eq!(
        tree,
        format!(
            "dataset {d}  s3://d@v3\n\
             \x20 checkpoint {k}  hf://m@3f2a\n\
             \x20   cluster {c}  llm-canary\n\
             \x20     load_run {run}  chat\n\
             \x20       report {r}  report.html\n\
             \x20     rollout {ro}  chat-v2\n\
             \x20       rollout_event {e0}  e0\n\
             \x20       rollout_event {e1}  e1\n\
             scenario {s}  chat.yaml\n\
             \x20 load_run {run}  chat (above)\n",
            d = id(0),
            k = id(1),
            c = id(2),
            run = id(7),
            r = id(8),
            ro = id(3),
            e0 = id(5),
            e1 = id(4),
            s = id(6)
        )
    );
    let dot = g.walk(&all[1].id).unwrap().dot();
    assert!(
        dot.starts_with("digraph lineage {\n  rankdir=LR;\n"),
        "{dot}"
    );
    assert!(
        dot.contains(&format!(
            "  \"{k}\" [label=\"checkpoint\\nhf://m@3f2a\\n{k}\", style=bold];\n",
            k = id(1)
        )),
        "{dot}"
    );
    assert!(
        dot.contains(&format!("  \"{}\" -> \"{}\";\n", id(0), id(1))),
        "{dot}"
    );
    assert!(dot.ends_with("}\n"), "{dot}");
    assert!(g
        .walk(&ContentId::parse("0000000000000000").unwrap())
        .is_none());
}

#[test]
fn a_parent_without_an_artefact_is_shown_as_missing() {
    let lost = ContentId::parse("abcdefabcdefabcd").unwrap();
    let run = Artifact::new(ArtifactKind::LoadRun, "r", json!({}), vec![lost.clone()]);
    let g = Graph::new(vec![run.clone()]);
    let walk = g.walk(&run.id).unwrap();
    assert_eq!(
        walk.tree(),
        format!(
            "load_run {}  r\nmade from:\n  ? {lost}  (no artefact read)\nmade into:\n  (nothing)\n",
            run.id
        )
    );
    assert_eq!(walk.json()["missing"], json!([lost.as_str()]));
    assert!(walk
        .dot()
        .contains(&format!("  \"{lost}\" -> \"{}\";", run.id)));
}

#[test]
fn artefact_files_round_trip_and_a_corrupt_one_is_named_with_its_place() {
    let dir = std::env::temp_dir().join(format!("sluice-lineage-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(read_dir(&dir).unwrap(), (Vec::new(), Vec::new()));
    let all = fixture();
    for a in &all {
        let path = write_artifact(&dir, a).unwrap();
        assert_eq!(path, dir.join(format!("{}.json", a.id)));
    }
    // Written twice: still one file.
    write_artifact(&dir, &all[0]).unwrap();
    let bad = dir.join("ffffffffffffffff.json");
    std::fs::write(&bad, "{\n  \"v\": 1,\n  \"id\": 7\n}\n").unwrap();
    let edited = dir.join("eeeeeeeeeeeeeeee.json");
    let mut changed = all[0].clone();
    changed.inputs = json!({"d": 2});
    std::fs::write(&edited, serde_json::to_vec(&changed).unwrap()).unwrap();
    std::fs::write(dir.join("notes.txt"), "not an artefact").unwrap();

    let (found, corrupt) = read_dir(&dir).unwrap();
    assert_eq!(found.len(), all.len());
    let mut want = all.clone();
    want.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(found, want);
    let reedited = Artifact::new(ArtifactKind::Dataset, "s3://d@v3", json!({"d": 2}), vec![]);
    assert_eq!(
        corrupt.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            format!(
                "{}: id {} is not the id of its kind, inputs and parents ({})",
                edited.display(),
                all[0].id,
                reedited.id
            ),
            format!(
                "{}: line 3 column 9: id: invalid type: integer `7`, expected a string",
                bad.display()
            ),
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
