use serde_json::json;

use super::*;
use crate::mirror::DiffRecord;

#[tokio::test]
async fn put_sets_a_policy_and_delete_removes_it() {
    let s = Server::start().await;
    let (status, body) = s
        .json(
            Method::PUT,
            "/v1/routes/chat/mirror",
            r#"{"cluster": "b", "percent": 10, "copies": 2.5, "sample_by": "x-session-id"}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["route"], "chat");
    assert_eq!(body["mirror"]["copies"], 2.5);
    assert_eq!(body["version"], 2);
    let snapshot = s.api.store.load();
    let policy = snapshot.routes[0].mirror.as_ref().unwrap();
    assert_eq!(policy.config.percent, 10.0);
    assert_eq!(policy.shadow.config.name, "b");

    // YAML is taken too, and the whole policy is replaced.
    let (status, _) = s
        .json(Method::PUT, "/v1/routes/chat/mirror", "cluster: a\n")
        .await;
    assert_eq!(status, StatusCode::OK);
    let snapshot = s.api.store.load();
    let policy = snapshot.routes[0].mirror.as_ref().unwrap();
    assert_eq!(policy.config.percent, 100.0);
    assert_eq!(policy.shadow.config.name, "a");

    let (status, body) = s.json(Method::DELETE, "/v1/routes/chat/mirror", "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["mirror"], Value::Null);
    assert!(s.api.store.load().routes[0].mirror.is_none());
    let actions = s.actions().await;
    for done in ["set mirror of route chat", "remove mirror of route chat"] {
        assert!(actions.iter().any(|a| a == done), "{done}: {actions:?}");
    }
    s.stop().await;
}

#[tokio::test]
async fn bad_policies_are_refused_with_every_path_and_change_nothing() {
    let s = Server::start().await;
    let (status, body) = s
        .json(
            Method::PUT,
            "/v1/routes/chat/mirror",
            r#"{"cluster": "nowhere", "percent": 101, "copies": -1}"#,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        json!({"errors": [
            {"path": "routes[0].mirror.cluster", "message": "unknown cluster `nowhere`"},
            {"path": "routes[0].mirror.percent", "message": "101 is not within 0..=100"},
            {"path": "routes[0].mirror.copies", "message": "-1 is not within 0 (excluded) ..= 16"},
        ]})
    );
    let (status, body) = s
        .json(
            Method::PUT,
            "/v1/routes/chat/mirror",
            r#"{"cluster": "a", "copies": "many"}"#,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["errors"][0]["path"], "copies", "{body}");
    let (status, body) = s.json(Method::PUT, "/v1/routes/chat/mirror", "").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["errors"][0]["message"],
        "a mirror policy is required (YAML or JSON, the shape of `routes[].mirror`)"
    );
    let (status, body) = s
        .json(Method::PUT, "/v1/routes/nope/mirror", r#"{"cluster": "a"}"#)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["path"], "route");
    assert_eq!(s.api.store.load().version, 1);
    assert!(s.api.store.load().routes[0].mirror.is_none());

    let (status, headers, _) = s
        .call(Method::GET, "/v1/routes/chat/mirror", Some(TOKEN), "")
        .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(headers["allow"], "PUT, DELETE");
    s.stop().await;
}

#[tokio::test]
async fn diffs_come_newest_first() {
    let s = Server::start().await;
    let (status, body) = s.json(Method::GET, "/v1/mirror/diffs", "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["diffs"], json!([]));
    assert_eq!(body["total"], 0);
    for id in ["first", "second"] {
        s.api.shared.mirror_diffs.push(DiffRecord {
            request_id: id.into(),
            kinds: vec!["text"],
            similarity: Some(0.5),
            ..DiffRecord::default()
        });
    }
    let (_, body) = s.json(Method::GET, "/v1/mirror/diffs", "").await;
    assert_eq!(body["total"], 2);
    assert_eq!(body["diffs"][0]["request_id"], "second");
    assert_eq!(body["diffs"][0]["kinds"], json!(["text"]));
    assert_eq!(body["diffs"][0]["similarity"], 0.5);
    // Redacted legs carry no text.
    assert!(body["diffs"][0]["shadow"].get("text").is_none());
    s.stop().await;
}

#[tokio::test]
async fn the_embedding_baseline_is_saved_once_whole_and_read_back_by_the_config() {
    let s = Server::start().await;
    let (status, body) = s
        .json(Method::GET, "/v1/routes/chat/mirror/embedding-baseline", "")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(
        body["error"],
        "route `chat` has no mirror with compare.embeddings"
    );
    let (status, body) = s
        .json(
            Method::GET,
            "/v1/routes/nowhere/mirror/embedding-baseline",
            "",
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");

    let policy = r#"{"cluster": "b", "compare": {"embeddings": {"cluster": "b", "window": 3}}}"#;
    let (status, body) = s.json(Method::PUT, "/v1/routes/chat/mirror", policy).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mirror = || s.api.store.load().routes[0].mirror.clone().unwrap();
    mirror().lock_drift().window.push(0.5);
    let (status, body) = s
        .json(Method::GET, "/v1/routes/chat/mirror/embedding-baseline", "")
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body["error"],
        "the baseline of route `chat` has 1 of its 3 pairs so far; save it once it is whole"
    );
    // The first three pairs are the baseline; a fourth is the window's.
    for s in [0.75, 1.0, 0.25] {
        mirror().lock_drift().window.push(s);
    }
    let (status, body) = s
        .json(Method::GET, "/v1/routes/chat/mirror/embedding-baseline", "")
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"v": 1, "route": "chat", "similarities": [0.5, 0.75, 1.0]})
    );

    // The answer is a file the config reads: a policy with it compares
    // its first window with those pairs, and reads nothing from them.
    let file =
        std::env::temp_dir().join(format!("sluice-api-baseline-{}.json", std::process::id()));
    std::fs::write(&file, body.to_string()).unwrap();
    let policy = json!({"cluster": "b", "compare": {"embeddings": {
        "cluster": "b", "window": 3, "baseline": file.display().to_string()}}});
    let (status, body) = s
        .json(Method::PUT, "/v1/routes/chat/mirror", &policy.to_string())
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let fresh = mirror();
    assert_eq!(fresh.reading().drift.pairs, 0);
    let (status, body) = s
        .json(Method::GET, "/v1/routes/chat/mirror/embedding-baseline", "")
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["similarities"], json!([0.5, 0.75, 1.0]));
    let mut reading = fresh.reading().drift;
    for s in [0.5, 0.75, 1.0] {
        reading = fresh.lock_drift().window.push(s);
    }
    assert_eq!(reading.kl, Some(0.0), "{reading:?}");

    // A file gone bad fails the change with its path; the policy stays.
    std::fs::write(&file, r#"{"v": 1, "similarities": []}"#).unwrap();
    let (status, body) = s
        .json(Method::PUT, "/v1/routes/chat/mirror", &policy.to_string())
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        body["errors"][0]["message"],
        format!(
            "{}: similarities: empty; a baseline needs at least one pair",
            file.display()
        )
    );
    assert_eq!(
        body["errors"][0]["path"],
        "routes[0].mirror.compare.embeddings.baseline"
    );
    assert!(Arc::ptr_eq(&mirror().drift, &fresh.drift));
    std::fs::remove_file(&file).unwrap();
    s.stop().await;
}
