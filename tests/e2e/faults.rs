//! Fault experiments against a real upstream through the real proxy:
//! aborts at a share, delays, TTL, max_active, halt_if, close and reset,
//! and header-triggered faults only where the route allows them.

mod cli;
mod l4;
mod l7;
mod sdk;
mod stream;

use serde_json::{json, Value};

use sluice_proxy::Sluice;

use crate::harness::{start, Admin, TestConfig};
use crate::support::NamedUpstream;

/// One http listener, one cluster `a` on `upstream`, route `chat`.
fn yaml(upstream: &NamedUpstream, allow_header_faults: bool) -> String {
    TestConfig::http()
        .cluster("a", "http", [upstream.addr()])
        .route_with(
            "chat",
            "a: 1",
            &format!("allow_header_faults: {allow_header_faults}"),
        )
        .yaml()
}

/// The echo upstream `a` behind sluice ([`yaml`], no header faults) and its control API.
async fn faulted() -> (NamedUpstream, Sluice, Admin) {
    let up = NamedUpstream::start("a").await.unwrap();
    let sluice = start(&yaml(&up, false));
    let admin = Admin::new(&sluice);
    (up, sluice, admin)
}

/// Adds an experiment and returns its id; the answer must be 201.
async fn add(admin: &Admin, experiment: Value) -> String {
    let (status, body) = admin.post("/v1/faults", experiment.to_string()).await;
    assert_eq!(status, 201, "{body}");
    body["id"].as_str().unwrap().to_string()
}

async fn show(admin: &Admin, id: &str) -> Value {
    let (status, body) = admin.get(&format!("/v1/faults/{id}")).await;
    assert_eq!(status, 200, "{body}");
    body
}

fn abort(status: u16) -> Value {
    json!({"abort": {"status": status, "body": "injected"}})
}
