#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use sluice_cli::ctl::AdminToken;
use sluice_filters::Artifact;

use super::*;

#[test]
fn a_scenario_sits_below_its_model_file_and_is_read_by_content() {
    let dir = std::env::temp_dir().join(format!("sluice-cli-lineage-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("model.yaml");
    std::fs::write(&model, "v: 1\narrival: { kind: exponential, rate: 2 }\n").unwrap();
    let scenario = dir.join("chat.yaml");
    std::fs::write(
        &scenario,
        "scenario: chat\nworkload: { from_model: model.yaml }\n",
    )
    .unwrap();
    let made = scenario_nodes(&scenario, Some("model.yaml")).unwrap();
    assert_eq!(made.len(), 2);
    assert_eq!(made[0].label, "model.yaml");
    assert_eq!(made[1].label, "chat.yaml");
    assert_eq!(made[1].parents, vec![made[0].id.clone()]);
    // Comments do not move either id; a changed model moves both.
    std::fs::write(
        &model,
        "# fitted\nv: 1\narrival: {rate: 2, kind: exponential}\n",
    )
    .unwrap();
    let again = scenario_nodes(&scenario, Some("model.yaml")).unwrap();
    assert_eq!(again, made);
    std::fs::write(&model, "v: 1\narrival: { kind: exponential, rate: 3 }\n").unwrap();
    let refit = scenario_nodes(&scenario, Some("model.yaml")).unwrap();
    assert_ne!(refit[0].id, made[0].id);
    assert_ne!(refit[1].id, made[1].id);
    let missing = scenario_nodes(&scenario, Some("gone.yaml")).unwrap_err();
    assert_eq!(
        format!("{missing:#}"),
        format!(
            "{}: No such file or directory (os error 2)",
            dir.join("gone.yaml").display()
        )
    );
    record(&dir.join("lineage"), &refit).unwrap();
    let (read, corrupt) = read_lineage_dir(&dir.join("lineage")).unwrap();
    assert_eq!((read.len(), corrupt.len()), (2, 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A lineage directory: dataset → checkpoint → cluster → rollout → event,
/// scenario (+ cluster) → run → report; the artefacts in that order.
fn fixture(dir: &Path) -> Vec<Artifact> {
    use serde_json::json;
    use sluice_filters::ArtifactKind as K;
    let node = |kind, label: &str, parents: Vec<&Artifact>| {
        Artifact::new(
            kind,
            label,
            json!({"label": label}),
            parents.into_iter().map(|p| p.id.clone()).collect(),
        )
    };
    let dataset = node(K::Dataset, "s3://data/chat@v3", vec![]);
    let ckpt = node(K::Checkpoint, "hf://org/llama@3f2a", vec![&dataset]);
    let cluster = node(K::Cluster, "llm-canary", vec![&ckpt]);
    let rollout = node(K::Rollout, "chat-v2", vec![&cluster]);
    let event = node(K::RolloutEvent, "pending → progressing", vec![&rollout]);
    let scenario = node(K::Scenario, "chat.yaml", vec![]);
    let run = node(K::LoadRun, "chat", vec![&scenario, &cluster]);
    let report = node(K::Report, "report.html", vec![&run]);
    let all = vec![
        dataset, ckpt, cluster, rollout, event, scenario, run, report,
    ];
    record(dir, &all).unwrap();
    all
}

fn args(dir: &Path, id: Option<&str>) -> LineageArgs {
    LineageArgs {
        id: id.map(str::to_owned),
        dot: false,
        json: false,
        dir: dir.to_path_buf(),
        admin: None,
        token: AdminToken::default(),
    }
}

#[test]
fn the_walk_from_a_report_as_a_tree_json_and_graphviz() {
    let dir = std::env::temp_dir().join(format!("sluice-cli-walk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let all = fixture(&dir);
    let id = |i: usize| all[i].id.to_string();
    let report = id(7);

    let tree = show(&args(&dir, Some(&report))).unwrap();
    assert_eq!(
        tree,
        Shown {
            text: format!(
                "report {}  report.html\n\
                 made from:\n\
                 \x20 load_run {}  chat\n\
                 \x20   cluster {}  llm-canary\n\
                 \x20     checkpoint {}  hf://org/llama@3f2a\n\
                 \x20       dataset {}  s3://data/chat@v3\n\
                 \x20   scenario {}  chat.yaml\n\
                 made into:\n\
                 \x20 (nothing)\n",
                id(7),
                id(6),
                id(2),
                id(1),
                id(0),
                id(5)
            ),
            said: vec![],
            code: 0,
        }
    );

    let json = show(&LineageArgs {
        json: true,
        ..args(&dir, Some(&report))
    })
    .unwrap();
    let v: serde_json::Value = serde_json::from_str(&json.text).unwrap();
    assert_eq!(v["root"], report.as_str());
    let nodes: Vec<&str> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["kind"].as_str().unwrap())
        .collect();
    assert_eq!(nodes.len(), 6, "{nodes:?}");
    let edges: Vec<(String, String)> = v["edges"]
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
    let mut want = vec![
        (id(0), id(1)),
        (id(1), id(2)),
        (id(2), id(6)),
        (id(5), id(6)),
        (id(6), id(7)),
    ];
    want.sort();
    assert_eq!(edges, want);

    // From the cluster: the rollout and its event are below it.
    let dot = show(&LineageArgs {
        dot: true,
        ..args(&dir, Some(&id(2)))
    })
    .unwrap()
    .text;
    for edge in [(0, 1), (1, 2), (2, 3), (3, 4), (2, 6), (6, 7)] {
        let line = format!("  \"{}\" -> \"{}\";\n", id(edge.0), id(edge.1));
        assert!(dot.contains(&line), "{line} not in {dot}");
    }
    assert!(
        !dot.contains(&id(5)),
        "the scenario is not the cluster's: {dot}"
    );

    // Everything, from the roots down.
    let whole = show(&args(&dir, None)).unwrap().text;
    assert!(whole.starts_with(&format!("dataset {}  s3://data/chat@v3\n", id(0))));
    assert!(
        whole.contains(&format!(
            "\nscenario {}  chat.yaml\n  load_run {}  chat (above)\n",
            id(5),
            id(6)
        )),
        "{whole}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unknown_ids_and_corrupt_files_are_named() {
    let dir = std::env::temp_dir().join(format!("sluice-cli-corrupt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let all = fixture(&dir);
    assert_eq!(
        show(&args(&dir, Some("0000000000000000"))).unwrap(),
        Shown {
            text: String::new(),
            said: vec![format!(
                "lineage: no artefact `0000000000000000` in {} (8 read)",
                dir.display()
            )],
            code: 2,
        }
    );
    assert_eq!(
        show(&args(&dir, Some("report"))).unwrap(),
        Shown {
            text: String::new(),
            said: vec!["lineage: `report` is not a lineage id (16 hex digits)".into()],
            code: 2,
        }
    );
    // A cut file: skipped, named with where it broke; the rest still shown.
    let cut = dir.join("0123456789abcdef.json");
    std::fs::write(&cut, "{\n  \"v\": 1,\n  \"id\": \"0123").unwrap();
    let shown = show(&args(&dir, Some(all[7].id.as_str()))).unwrap();
    assert_eq!(
        shown.said,
        [format!(
            "lineage: skipped {}: line 3 column 13: id: EOF while parsing a string",
            cut.display()
        )]
    );
    assert_eq!(shown.code, 1);
    assert!(
        shown.text.starts_with(&format!("report {}", all[7].id)),
        "{}",
        shown.text
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
