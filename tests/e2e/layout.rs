//! The crate map of ARCHITECTURE.md, checked against `cargo metadata`: each
//! workspace crate depends only on the workspace crates it is allowed to, and
//! the load-testing half never pulls in the proxy or pingora, even transitively.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

use crate::support::workspace_root;

/// Every allowed edge between workspace crates (normal dependencies).
/// `filters ← control ← proxy ← cli` and `filters ← workload ← cli`.
const ALLOWED: &[(&str, &[&str])] = &[
    ("sluice-filters", &[]),
    ("sluice-control", &["sluice-filters"]),
    ("sluice-proxy", &["sluice-filters", "sluice-control"]),
    ("sluice-workload", &["sluice-filters"]),
    (
        "sluice-cli",
        &[
            "sluice-filters",
            "sluice-control",
            "sluice-proxy",
            "sluice-workload",
        ],
    ),
    ("sluice-tests", &[]),
    (
        "sluice-benches",
        &[
            "sluice-filters",
            "sluice-control",
            "sluice-proxy",
            "sluice-cli",
            "sluice-workload",
        ],
    ),
];

struct Graph {
    /// package id → name
    names: BTreeMap<String, String>,
    /// package id → ids of its normal (non-dev, non-build) dependencies
    deps: BTreeMap<String, Vec<String>>,
    members: Vec<String>,
}

fn metadata() -> Graph {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(workspace_root())
        .args(["metadata", "--format-version", "1", "--locked"])
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata JSON");
    let names = doc["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| {
            let id = p["id"].as_str().expect("id").to_string();
            (id, p["name"].as_str().expect("name").to_string())
        })
        .collect();
    let deps = doc["resolve"]["nodes"]
        .as_array()
        .expect("resolve.nodes")
        .iter()
        .map(|n| {
            let normal = n["deps"]
                .as_array()
                .expect("deps")
                .iter()
                .filter(|d| {
                    d["dep_kinds"]
                        .as_array()
                        .expect("dep_kinds")
                        .iter()
                        .any(|k| k["kind"].is_null())
                })
                .map(|d| d["pkg"].as_str().expect("pkg").to_string())
                .collect();
            (n["id"].as_str().expect("id").to_string(), normal)
        })
        .collect();
    let members = doc["workspace_members"]
        .as_array()
        .expect("workspace_members")
        .iter()
        .map(|m| m.as_str().expect("member").to_string())
        .collect();
    Graph {
        names,
        deps,
        members,
    }
}

impl Graph {
    fn name(&self, id: &str) -> &str {
        &self.names[id]
    }

    fn id_of(&self, name: &str) -> String {
        self.members
            .iter()
            .find(|id| self.name(id) == name)
            .unwrap_or_else(|| panic!("{name} is not a workspace member"))
            .clone()
    }

    /// Every package `root` depends on, directly or not (normal edges only).
    fn closure(&self, root: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![self.id_of(root)];
        while let Some(id) = todo.pop() {
            for dep in &self.deps[&id] {
                if seen.insert(self.name(dep).to_string()) {
                    todo.push(dep.clone());
                }
            }
        }
        seen
    }
}

#[test]
fn workspace_crates_depend_only_along_the_crate_map() {
    let graph = metadata();
    let member_names: BTreeSet<&str> = graph.members.iter().map(|m| graph.name(m)).collect();
    let listed: BTreeSet<&str> = ALLOWED.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        member_names, listed,
        "every workspace crate has a row in ALLOWED (and ARCHITECTURE.md)"
    );
    let mut forbidden = Vec::new();
    for member in &graph.members {
        let name = graph.name(member);
        let allowed = ALLOWED.iter().find(|(n, _)| *n == name).expect("listed").1;
        for dep in &graph.deps[member] {
            let dep_name = graph.name(dep);
            if member_names.contains(dep_name) && !allowed.contains(&dep_name) {
                forbidden.push(format!("{name} -> {dep_name}"));
            }
        }
    }
    assert!(forbidden.is_empty(), "forbidden crate edges: {forbidden:?}");
}

#[test]
fn the_workload_half_has_no_proxy_and_no_pingora() {
    let closure = metadata().closure("sluice-workload");
    let bad: Vec<&String> = closure
        .iter()
        .filter(|n| *n == "sluice-proxy" || *n == "sluice-control" || n.starts_with("pingora"))
        .collect();
    assert!(bad.is_empty(), "sluice-workload depends on {bad:?}");
    assert!(closure.contains("sluice-filters"), "{closure:?}");
}

#[test]
fn filters_stays_pure() {
    let closure = metadata().closure("sluice-filters");
    let bad: Vec<&String> = closure
        .iter()
        .filter(|n| {
            ["tokio", "hyper", "mio", "socket2"].contains(&n.as_str()) || n.starts_with("pingora")
        })
        .collect();
    assert!(
        bad.is_empty(),
        "sluice-filters depends on I/O crates {bad:?}"
    );
}
