//! The load Job and its merge Job (load-job.yaml, merge-job.yaml): they pass
//! the schemas, a broken copy does not, and they agree with each other and
//! with sluice: the ConfigMap's scenario validates, and the shard count is the
//! same in `completions`, `parallelism`, `--shard i/n` and the merge's list.

use serde_json::Value;

use super::{documents, k8s_dir, kind, said, validate, validator};
use crate::cli::sluice;
use crate::support::{require, TempDir};

fn args(job: &Value) -> Vec<String> {
    job.pointer("/spec/template/spec/containers/0/args")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_load_job_manifests_pass_the_kubernetes_schemas_and_a_broken_copy_does_not() {
    let Some(bin) = validator() else {
        require("kubernetes-validate (pip, in .venv)", false);
        return;
    };
    let files = vec![
        k8s_dir().join("load-job.yaml"),
        k8s_dir().join("merge-job.yaml"),
    ];
    let good = validate(&bin, &files).await;
    let stdout = String::from_utf8_lossy(&good.stdout);
    assert!(
        good.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&good.stderr)
    );
    for resource in [
        "configmap/sluice-load",
        "persistentvolumeclaim/sluice-load-results",
        "job/sluice-load ",
        "job/sluice-load-merge",
    ] {
        assert!(
            stdout.contains(&format!("passed for resource {resource}")),
            "{stdout}"
        );
    }

    // A misspelt key, then a wrong enum value: strict validation names each.
    let tmp = TempDir::new("k8s-broken");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    for (from, to, named) in [
        (
            "  parallelism: 4\n",
            "  paralelism: 4\n",
            "'paralelism' was unexpected",
        ),
        (
            "  completions: 4\n",
            "  completions: four\n",
            "'four' is not of type 'integer'",
        ),
    ] {
        assert!(text.contains(from), "{from}");
        let path = tmp.path().join("load-job.yaml");
        std::fs::write(&path, text.replace(from, to)).unwrap();
        let bad = validate(&bin, &[path]).await;
        let message = said(&bad);
        assert!(!bad.status.success(), "{message}");
        assert!(
            message.contains("did not validate for resource job/sluice-load"),
            "{message}"
        );
        assert!(message.contains(named), "{message}");
    }
}

#[tokio::test]
async fn the_load_job_agrees_with_its_merge_and_its_scenario_validates() {
    let load = documents(&k8s_dir().join("load-job.yaml"));
    let merge = documents(&k8s_dir().join("merge-job.yaml"));
    let job = kind(&load, "Job");
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    let shards = job["spec"]["completions"].as_u64().unwrap();
    assert_eq!(job["spec"]["parallelism"].as_u64(), Some(shards));
    let a = args(job);
    let at = |flag: &str| a[a.iter().position(|x| x == flag).unwrap() + 1].clone();
    assert_eq!(a[0], "load");
    assert_eq!(at("--shard"), format!("$(JOB_COMPLETION_INDEX)/{shards}"));
    assert_eq!(at("-o"), "/results/shard-$(JOB_COMPLETION_INDEX).json");
    assert_eq!(at("--start-at"), "$(START_AT)");
    let env = job
        .pointer("/spec/template/spec/containers/0/env")
        .unwrap()
        .to_string();
    assert!(
        env.contains("batch.kubernetes.io/job-completion-index"),
        "{env}"
    );

    // The merge names every shard's file once, and writes run.json.
    let m = args(kind(&merge, "Job"));
    assert_eq!(&m[..2], ["load", "merge"]);
    let expected: Vec<String> = (0..shards)
        .map(|i| format!("/results/shard-{i}.json"))
        .collect();
    assert_eq!(&m[2..m.len() - 2], expected.as_slice());
    assert_eq!(&m[m.len() - 2..], ["-o", "/results/run.json"]);

    // The ConfigMap's scenario is one `sluice validate` accepts, and its
    // start time one `--start-at` reads.
    let config = kind(&load, "ConfigMap");
    let tmp = TempDir::new("k8s-scenario");
    let scenario = tmp.path().join("scenario.yaml");
    std::fs::write(&scenario, config["data"]["scenario.yaml"].as_str().unwrap()).unwrap();
    let out = sluice(vec!["validate".into(), scenario.display().to_string()]).await;
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("valid scenario `chat-canary`"), "{said}");
    let start = config["data"]["start_at"].as_str().unwrap();
    assert!(sluice_filters::parse_wall_clock(start).is_ok(), "{start}");
}
