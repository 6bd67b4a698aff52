//! Scopes over real sockets: what each token may call, 403 naming the
//! scope needed, the failed-authentication limit, and the token names in
//! the audit log.

use super::*;

const TOKENS: &[(&str, Scope, &str)] = &[
    ("ci", Scope::Read, "read-secret"),
    ("ops", Scope::Write, "write-secret"),
    ("root", Scope::Admin, "admin-secret"),
];

async fn status(s: &Server, method: Method, path: &str, token: &str, body: &str) -> StatusCode {
    s.call(method, path, Some(token), body).await.0
}

#[tokio::test]
async fn each_scope_calls_what_it_covers_and_gets_403_naming_the_scope_past_it() {
    let s = Server::with_tokens(TOKENS).await;
    let split = r#"{"a": 50, "b": 50}"#;
    for token in ["read-secret", "write-secret", "admin-secret"] {
        assert_eq!(
            status(&s, Method::GET, "/v1/routes", token, "").await,
            StatusCode::OK
        );
    }
    let (code, _, body) = s
        .call(
            Method::PUT,
            "/v1/routes/chat/split",
            Some("read-secret"),
            split,
        )
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap(),
        json!({
            "error": "token `ci` has scope read; PUT /v1/routes/{route}/split needs scope write",
            "needed_scope": "write",
        })
    );
    let put_split = Method::PUT;
    assert_eq!(
        status(
            &s,
            put_split,
            "/v1/routes/chat/split",
            "write-secret",
            split
        )
        .await,
        StatusCode::OK
    );
    let (code, _, body) = s
        .call(Method::PUT, "/v1/config", Some("write-secret"), "{}")
        .await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["needed_scope"], "admin");
    let (_, _, config) = s
        .call(Method::GET, "/v1/config", Some("read-secret"), "")
        .await;
    let config = serde_json::from_slice::<Value>(&config).unwrap()["config"].to_string();
    assert_eq!(
        status(&s, Method::PUT, "/v1/config", "admin-secret", &config).await,
        StatusCode::OK
    );
    // A path that does not exist is 404 to any known token, not 403.
    assert_eq!(
        status(&s, Method::GET, "/v1/nothing", "read-secret", "").await,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn changes_in_the_audit_log_name_their_token() {
    let s = Server::with_tokens(TOKENS).await;
    let split = r#"{"a": 70, "b": 30}"#;
    let put = status(
        &s,
        Method::PUT,
        "/v1/routes/chat/split",
        "write-secret",
        split,
    )
    .await;
    assert_eq!(put, StatusCode::OK);
    let (code, _, body) = s
        .call(Method::GET, "/v1/events", Some("read-secret"), "")
        .await;
    assert_eq!(code, StatusCode::OK);
    let events: Value = serde_json::from_slice(&body).unwrap();
    let last = events["events"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["action"], "set split of route chat");
    assert_eq!(last["source"], "api");
    assert_eq!(last["token"], "ops");
    let first = &events["events"][0];
    assert_eq!(first["source"], "startup");
    assert_eq!(first.get("token"), None);
}

#[tokio::test]
async fn a_peer_that_fails_too_often_gets_429_even_with_a_right_token() {
    let s = Server::with_tokens(TOKENS).await;
    for _ in 0..10 {
        let code = status(&s, Method::GET, "/v1/routes", "guess", "").await;
        assert_eq!(code, StatusCode::UNAUTHORIZED);
    }
    let (code, headers, body) = s
        .call(Method::GET, "/v1/routes", Some("admin-secret"), "")
        .await;
    assert_eq!(code, StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap(),
        json!({"error": "too many failed authentications from this address"})
    );
    // Health needs no token and is not limited.
    assert_eq!(
        s.call(Method::GET, "/healthz", None, "").await.0,
        StatusCode::OK
    );
    let metrics = s.api.shared.metrics.encode();
    assert!(
        metrics.contains("sluice_admin_auth_failures_total{reason=\"wrong_token\"} 10"),
        "{metrics}"
    );
    assert!(
        metrics.contains("sluice_admin_auth_refusals_total 1"),
        "{metrics}"
    );
}
