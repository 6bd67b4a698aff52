//! `/v1/load-runs` over HTTP: a push stored and replaced by run id, the
//! list newest first and bounded, the token on every method, bad bodies
//! named by field, unknown ids.
// Tests may spawn bare tasks (each test's runtime ends with it) and read std time.
#![allow(clippy::disallowed_methods)]

use super::*;

/// A valid push of run `id` in `state`.
fn run(id: &str, state: &str) -> Value {
    json!({
        "run_id": id, "scenario": "chat", "state": state, "shard": "0/1", "mode": "open",
        "stage": 0, "stages": 1, "offered_rate": 20.0, "achieved_rate": 19.5,
        "sent": 40, "done": 38, "failed": 1, "in_flight": 2, "queued": 0,
        "ttft_p95_ms": 41.0, "error_rate": 2.5,
        "thresholds": [{"name": "ttft_p95", "bound": 800.0, "value": 41.0, "passed": true}],
        "passed": true, "elapsed_s": 2.0, "duration_s": 10.0,
        "started_at": "2026-12-03T08:00:00Z", "updated_at": "2026-12-03T08:00:02Z",
    })
}

#[tokio::test]
async fn a_push_is_stored_then_replaced_by_its_run_id() {
    let s = Server::start().await;
    let (status, body) = s
        .json(
            Method::POST,
            "/v1/load-runs",
            &run("load-1", "running").to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body, run("load-1", "running"));
    let (status, body) = s.json(Method::GET, "/v1/load-runs/load-1", "").await;
    assert_eq!((status, body), (StatusCode::OK, run("load-1", "running")));

    let mut done = run("load-1", "done");
    done["sent"] = json!(100);
    let (status, _) = s
        .json(Method::POST, "/v1/load-runs", &done.to_string())
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, list) = s.json(Method::GET, "/v1/load-runs", "").await;
    assert_eq!(list, json!({ "runs": [done] }));
    s.stop().await;
}

#[tokio::test]
async fn the_list_is_newest_first_and_keeps_the_newest_64() {
    let s = Server::start().await;
    for i in 0..MAX_LOAD_RUNS + 3 {
        let body = run(&format!("load-{i}"), "done").to_string();
        let (status, _) = s.json(Method::POST, "/v1/load-runs", &body).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    // An update keeps its run's place.
    let body = run(&format!("load-{}", MAX_LOAD_RUNS), "interrupted").to_string();
    assert_eq!(
        s.json(Method::POST, "/v1/load-runs", &body).await.0,
        StatusCode::OK
    );
    let (_, list) = s.json(Method::GET, "/v1/load-runs", "").await;
    let ids: Vec<&str> = list["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();
    let want: Vec<String> = (3..MAX_LOAD_RUNS + 3)
        .rev()
        .map(|i| format!("load-{i}"))
        .collect();
    assert_eq!(ids, want);
    assert_eq!(list["runs"][2]["state"], "interrupted");
    let (status, body) = s.json(Method::GET, "/v1/load-runs/load-2", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body,
        json!({ "error": "unknown load run `load-2`", "path": "run_id" })
    );
    s.stop().await;
}

#[tokio::test]
async fn every_load_run_endpoint_needs_the_token() {
    let s = Server::start().await;
    let body = run("load-1", "running").to_string();
    for (method, path, body) in [
        (Method::POST, "/v1/load-runs", body.as_str()),
        (Method::GET, "/v1/load-runs", ""),
        (Method::GET, "/v1/load-runs/load-1", ""),
    ] {
        for token in [None, Some("wrong")] {
            let (status, _, _) = s.call(method.clone(), path, token, body).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}");
        }
    }
    assert!(s.api.load_runs.list().is_empty());
    let (status, _, _) = s
        .call(Method::DELETE, "/v1/load-runs", Some(TOKEN), "")
        .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    s.stop().await;
}

#[tokio::test]
async fn a_bad_body_is_400_naming_the_field() {
    let s = Server::start().await;
    let with = |key: &str, value: Value| {
        let mut r = run("load-1", "running");
        r[key] = value;
        r.to_string()
    };
    let mut missing = run("load-1", "running");
    missing.as_object_mut().unwrap().remove("state");
    let cases = [
        (
            with("state", json!("paused")),
            "unknown variant `paused`, expected one of `running`, `done`, `interrupted`",
            "state",
        ),
        (
            with("sent", json!(-1)),
            "invalid value: integer `-1`, expected u64",
            "sent",
        ),
        (missing.to_string(), "missing field `state`", "."),
        (
            with("error_rate", json!(250.0)),
            "must be a percent within 0..=100, found 250",
            "error_rate",
        ),
        (
            with("run_id", json!("../x")),
            "must be 1 to 64 letters, digits, `.`, `_`, `:` or `-`, found `../x`",
            "run_id",
        ),
        ("not json".to_owned(), "expected ident", "."),
    ];
    for (body, error, path) in cases {
        let (status, answer) = s.json(Method::POST, "/v1/load-runs", &body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(answer, json!({ "error": error, "path": path }), "{body}");
    }
    assert!(s.api.load_runs.list().is_empty());
    s.stop().await;
}
