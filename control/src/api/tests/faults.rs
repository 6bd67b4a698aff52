//! `/v1/faults` over HTTP: add, list, show, remove, the audit log, and
//! every kind of bad body.

use super::*;

const FAULT: &str = r#"{"id": "abort-half", "match": {"route": "chat"}, "percent": 50,
    "ttl": "2m", "action": {"abort": {"status": 503, "body": "nope"}}}"#;

#[tokio::test]
async fn an_experiment_is_added_listed_shown_and_removed() {
    let s = Server::start().await;
    let (status, body) = s.json(Method::POST, "/v1/faults", FAULT).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["id"], "abort-half");
    assert_eq!(body["kind"], "abort");
    assert_eq!(body["state"], "active");
    assert_eq!(body["injected"], 0);
    assert_eq!(
        body["action"],
        json!({"abort": {"status": 503, "body": "nope"}})
    );
    let left = body["time_left_ms"].as_u64().unwrap();
    assert!((110_000..=120_000).contains(&left), "{body}");

    // Without an id, one is made up; YAML is read too.
    let (status, body) = s
        .json(
            Method::POST,
            "/v1/faults",
            "ttl: 30s\naction: { delay: { delay: 5ms } }\n",
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let generated = body["id"].as_str().unwrap().to_string();
    assert!(generated.starts_with("f-"), "{body}");

    let (status, list) = s.json(Method::GET, "/v1/faults", "").await;
    assert_eq!(status, StatusCode::OK);
    let ids: Vec<&str> = list["faults"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["abort-half", generated.as_str()]);
    let (_, config) = s.json(Method::GET, "/v1/config", "").await;
    assert_eq!(config["config"]["faults"][0]["id"], "abort-half");

    let (status, shown) = s.json(Method::GET, "/v1/faults/abort-half", "").await;
    assert_eq!(
        (status, shown["percent"].clone()),
        (StatusCode::OK, json!(50.0))
    );

    let (status, body) = s.json(Method::DELETE, "/v1/faults/abort-half", "").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["removed"], "abort-half");
    let (status, _) = s.json(Method::GET, "/v1/faults/abort-half", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = s.json(Method::DELETE, "/v1/faults/abort-half", "").await;
    assert_eq!(
        (status, body),
        (
            StatusCode::NOT_FOUND,
            json!({"error": "unknown fault `abort-half`", "path": "id"})
        )
    );

    let (_, events) = s.json(Method::GET, "/v1/events", "").await;
    let actions: Vec<(&str, &str)> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["action"].as_str().unwrap(), e["result"].as_str().unwrap()))
        .collect();
    assert!(
        actions.contains(&("add fault abort-half", "applied")),
        "{actions:?}"
    );
    assert!(
        actions.contains(&("remove fault abort-half", "applied")),
        "{actions:?}"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_taken_id_is_409_and_bad_bodies_are_400_with_every_path() {
    let s = Server::start().await;
    let (status, _) = s.json(Method::POST, "/v1/faults", FAULT).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, body) = s.json(Method::POST, "/v1/faults", FAULT).await;
    assert_eq!(
        (status, body),
        (
            StatusCode::CONFLICT,
            json!({"error": "fault `abort-half` already exists", "path": "id"})
        )
    );
    let cases: [(&str, Value); 6] = [
        (
            "",
            json!([{"path": "", "message": "an experiment is required (YAML or JSON, the shape of one `faults:` item)"}]),
        ),
        (
            r#"{"id": "x", "ttl": "1m", "action": {"abort": {"status": "503"}}}"#,
            json!([{"path": "action.abort.status", "message": "invalid type: string \"503\", expected u16 at line 1 column 57"}]),
        ),
        (
            r#"{"id": "x", "ttl": "1m", "surprise": 1, "action": {"reset": {}}}"#,
            json!([{"path": "surprise", "message": "unknown field `surprise`, expected one of `id`, `match`, `percent`, `ttl`, `max_active`, `halt_if`, `action` at line 1 column 26"}]),
        ),
        (
            r#"{"id": "x", "percent": 101, "match": {"route": "nope"}, "action": {"delay": {"delay": "fast"}}}"#,
            json!([
                {"path": "match.route", "message": "unknown route `nope`"},
                {"path": "percent", "message": "101 is not within 0..=100"},
                {"path": "ttl", "message": "required (how long the experiment may fire, e.g. 5m)"},
                {"path": "action.delay.delay", "message": "`fast` is not a duration like 250ms or 1s"},
            ]),
        ),
        (
            r#"{"id": "x", "ttl": "2h", "max_active": 0, "action": {"truncate": {"mode": "abrupt"}, "drop_done": {}}}"#,
            json!([
                {"path": "ttl", "message": "`2h` is longer than the maximum 1h (runtime.max_fault_ttl)"},
                {"path": "max_active", "message": "must be at least 1"},
                {"path": "action", "message": "exactly one action is required, found truncate, drop_done"},
            ]),
        ),
        (
            r#"{"id": "x", "ttl": "1m", "action": {"latency": {"latency": "5ms"}}}"#,
            json!([{"path": "action.latency", "message": "acts on tcp connections: set match.listener to a tcp listener"}]),
        ),
    ];
    for (body, errors) in cases {
        let (status, answer) = s.json(Method::POST, "/v1/faults", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer["errors"], errors, "{body}");
    }
    let (_, list) = s.json(Method::GET, "/v1/faults", "").await;
    assert_eq!(list["faults"].as_array().unwrap().len(), 1);
    let (status, _) = s.json(Method::PUT, "/v1/faults/abort-half", "").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    s.stop().await;
}
