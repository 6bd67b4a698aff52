//! The endpoint table: every row resolves to itself, wrong methods list the
//! right ones, and the docs name every endpoint, gate and fault action.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::config::Gate;
use sluice_filters::ActionName;

#[test]
fn every_endpoint_round_trips_and_resolves_to_itself() {
    for &e in ApiEndpoint::ALL {
        assert_eq!(ApiEndpoint::parse(e.as_str()), Ok(e));
        let args = ["a", "pause"];
        let path = e.path(&args);
        assert!(!path.contains('{'), "{path}");
        let taken = e.template().matches('{').count();
        assert_eq!(
            resolve(e.method(), &path),
            Resolved::Found(e, args[..taken].to_vec()),
            "{e}"
        );
    }
}

#[test]
fn paths_fill_in_order_and_wrong_methods_list_the_right_ones() {
    assert_eq!(
        ApiEndpoint::RolloutCommand.path(&["chat-v2", Command::Abort.as_str()]),
        "/v1/rollouts/chat-v2/abort"
    );
    assert_eq!(
        ApiEndpoint::PutSplit.path(&["chat"]),
        "/v1/routes/chat/split"
    );
    assert_eq!(
        resolve("DELETE", "/v1/config"),
        Resolved::WrongMethod("GET, PUT".into())
    );
    assert_eq!(
        resolve("GET", "/v1/rollouts/x/promote"),
        Resolved::WrongMethod("POST".into())
    );
    assert_eq!(
        resolve("POST", "/v1/routes/chat/mirror"),
        Resolved::WrongMethod("PUT, DELETE".into())
    );
    assert_eq!(resolve("GET", "/v1/rollouts/"), Resolved::NotFound);
    assert_eq!(resolve("GET", "/v1/nothing"), Resolved::NotFound);
    assert_eq!(
        ApiEndpoint::RolloutCommand.documented(),
        "/v1/rollouts/{name}/pause|resume|promote|abort"
    );
}

/// The README and the pages under `docs/`, together.
fn docs() -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut text = std::fs::read_to_string(root.join("README.md")).unwrap();
    if let Ok(pages) = std::fs::read_dir(root.join("docs")) {
        for page in pages {
            let path = page.unwrap().path();
            if path.extension().is_some_and(|x| x == "md") {
                text.push_str(&std::fs::read_to_string(path).unwrap());
            }
        }
    }
    text
}

#[test]
fn the_docs_name_every_endpoint_gate_and_action() {
    let docs = docs();
    let missing: Vec<String> = ApiEndpoint::ALL
        .iter()
        .map(|e| e.documented())
        .chain(Gate::ALL.iter().map(|g| format!("`{g}`")))
        .chain(ActionName::ALL.iter().map(|a| format!("`{a}`")))
        .filter(|name| !docs.contains(name.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "not in README.md or docs/*.md: {missing:?}"
    );
}

#[test]
fn the_scope_table_in_the_docs_is_the_routers() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let page = std::fs::read_to_string(root.join("docs/control-api.md")).unwrap();
    for &endpoint in ApiEndpoint::ALL {
        let row = |scope: &str| format!("| `{endpoint}` | {scope} |");
        match endpoint.scope() {
            Some(scope) => assert!(
                page.contains(&row(scope.as_str())),
                "{}",
                row(scope.as_str())
            ),
            None => assert!(!endpoint.template().starts_with("/v1/"), "{endpoint}"),
        }
    }
}
