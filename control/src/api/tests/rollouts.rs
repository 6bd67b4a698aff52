//! `/v1/rollouts` over HTTP: add, show, list, commands, remove, errors.
// Tests may spawn bare tasks (each test's runtime ends with it) and read std time.
#![allow(clippy::disallowed_methods)]

use super::*;

const ROLLOUT: &str = "name: chat-v2\nroute: chat\nstable: a\ncanary: b\nhold: 1m\n\
                       min_requests: 10\ngates: { error_rate: 1%, ttft_p95: 800ms }\n";

/// Polls the rollout until `until` holds of it.
async fn wait_for(s: &Server, until: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = s.json(Method::GET, "/v1/rollouts/chat-v2", "").await;
        assert_eq!(status, StatusCode::OK);
        if until(&body) {
            return body;
        }
        assert!(tokio::time::Instant::now() < deadline, "{body}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_rollout_added_over_the_api_runs_and_answers_commands() {
    let s = Server::start().await;
    let (status, body) = s.json(Method::POST, "/v1/rollouts", ROLLOUT).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        body,
        json!({
            "name": "chat-v2", "route": "chat", "stable": "a", "canary": "b",
            "state": "pending", "step": 0, "steps": [1, 5, 20, 50, 100], "weight": 0,
            "breaches": 0, "gates": {}, "events": [],
        })
    );
    let body = wait_for(&s, |b| b["state"] == "progressing").await;
    assert_eq!(
        (body["step"].clone(), body["weight"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(
        body["gates"]["error_rate"],
        json!({"gate": "error_rate", "value": null, "bound": 1.0, "unit": "%",
               "samples": 0, "ok": null})
    );
    assert_eq!(body["events"][0]["reason"], "started");
    let (_, routes) = s.json(Method::GET, "/v1/routes", "").await;
    assert_eq!(routes[0]["split"], json!({"a": 99, "b": 1}));
    // Part of the live config.
    let (_, config) = s.json(Method::GET, "/v1/config", "").await;
    assert_eq!(config["config"]["rollouts"][0]["name"], "chat-v2");

    let (status, list) = s.json(Method::GET, "/v1/rollouts", "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert!(list[0].get("events").is_none(), "{list}");

    let (status, body) = s.json(Method::POST, "/v1/rollouts/chat-v2/pause", "").await;
    assert_eq!(
        (status, body["state"].clone()),
        (StatusCode::OK, json!("paused"))
    );
    let (status, body) = s.json(Method::POST, "/v1/rollouts/chat-v2/pause", "").await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        body,
        json!({"error": "cannot pause a rollout that is paused"})
    );
    let (status, body) = s.json(Method::POST, "/v1/rollouts/chat-v2/abort", "").await;
    assert_eq!((status, body["weight"].clone()), (StatusCode::OK, json!(0)));
    let (_, routes) = s.json(Method::GET, "/v1/routes", "").await;
    assert_eq!(routes[0]["split"], json!({"a": 100, "b": 0}));

    let (_, _, metrics) = s.call(Method::GET, "/metrics", None, "").await;
    let metrics = String::from_utf8_lossy(&metrics);
    assert!(metrics.contains(r#"sluice_rollout_state{rollout="chat-v2",state="aborted"} 1"#));
    assert!(metrics.contains(r#"sluice_rollout_weight{rollout="chat-v2"} 0"#));
    let actions = s.actions().await;
    assert_eq!(
        actions[1..],
        [
            "add rollout chat-v2",
            "rollout chat-v2: step 1 → weight 1 (started)",
            "rollout chat-v2: paused (operator: pause)",
            "rollout chat-v2: aborted → weight 0 (operator: abort)",
            "rollout chat-v2: finished (aborted), out of the config",
        ]
    );

    let (status, body) = s.json(Method::DELETE, "/v1/rollouts/chat-v2", "").await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({"removed": "chat-v2"}))
    );
    let (status, body) = s.json(Method::GET, "/v1/rollouts/chat-v2", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body,
        json!({"error": "unknown rollout `chat-v2`", "path": "name"})
    );
    s.stop().await;
}

#[tokio::test]
async fn bad_rollouts_and_commands_are_refused() {
    let s = Server::start().await;
    let (status, _) = s.json(Method::POST, "/v1/rollouts", ROLLOUT).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, body) = s.json(Method::POST, "/v1/rollouts", ROLLOUT).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        body,
        json!({"error": "rollout `chat-v2` already exists", "path": "name"})
    );

    // JSON works as well as YAML; paths are relative to the rollout.
    let bad = r#"{"name": "x", "route": "chat", "stable": "a", "canary": "a",
                  "window": "2m", "gates": {"error_rate": "2 %%"}}"#;
    let (status, body) = s.json(Method::POST, "/v1/rollouts", bad).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        json!({"errors": [
            {"path": "route", "message": "route `chat` already has rollout `chat-v2` (rollouts[0])"},
            {"path": "canary", "message": "must differ from stable (`a`)"},
            {"path": "window", "message": "2m is over the 60s maximum"},
            {"path": "gates.error_rate", "message": "`2 %%` is not a percent like 1% or 0.5%"},
        ]})
    );
    let (status, body) = s
        .json(Method::POST, "/v1/rollouts", "{name: x, rout: chat}")
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let message = body["errors"][0]["message"].as_str().unwrap();
    assert!(message.starts_with("unknown field `rout`"), "{body}");

    let (status, body) = s
        .json(Method::POST, "/v1/rollouts/chat-v2/explode", "")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body,
        json!({"error": "unknown rollout command `explode` (expected one of pause, resume, promote, abort)"})
    );
    let (status, body) = s.json(Method::POST, "/v1/rollouts/nope/resume", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body,
        json!({"error": "unknown rollout `nope`", "path": "name"})
    );
    let (status, headers, _) = s.call(Method::PUT, "/v1/rollouts", Some(TOKEN), "").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(headers["allow"], "GET, POST");
    let (status, headers, _) = s
        .call(Method::GET, "/v1/rollouts/chat-v2/promote", Some(TOKEN), "")
        .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(headers["allow"], "POST");
    s.stop().await;
}

/// The API called without a socket, so that tokio's clock can be paused.
async fn call(api: &Arc<AdminApi>, method: Method, path: &str, body: &str) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let (parts, body) = api.handle(req).await.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    (parts.status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test(start_paused = true)]
async fn a_rolled_back_rollout_frees_its_route_and_stays_listed_until_deleted() {
    let (store, shared) = testing::store(&testing::ab_chat("sticky: { header: x-session-id }"));
    let observers = Observers::default();
    let rollouts = Rollouts::new(store.clone(), shared.clone(), observers.clone());
    let api = AdminApi::new(
        store.clone(),
        shared.clone(),
        rollouts,
        observers,
        Arc::new(Readiness::new()),
        Auth::fixed(
            &[("default", Scope::Admin, TOKEN)],
            shared.metrics.registry(),
        ),
    );
    let cancel = CancellationToken::new();
    let tasks = [
        tokio::spawn(shared.stats.clone().run_aggregator(cancel.clone())),
        tokio::spawn(api.rollouts.clone().run(cancel.clone())),
    ];
    let (status, _) = call(&api, Method::POST, "/v1/rollouts", ROLLOUT).await;
    assert_eq!(status, StatusCode::CREATED);
    // The canary answers nothing but 500s, until its rollout gives up.
    let canary = shared.stats.key("chat", "b", "v2");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        for _ in 0..5 {
            shared.stats.record(crate::stats::Sample {
                load: false,
                grpc: None,
                key: canary,
                status: 500,
                latency: Duration::from_millis(5),
                tokens: None,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (_, body) = call(&api, Method::GET, "/v1/rollouts/chat-v2", "").await;
        if body["state"] == "rolled_back" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{body}");
    }
    // Out of the live config: its route is free for the next one.
    let (_, config) = call(&api, Method::GET, "/v1/config", "").await;
    assert_eq!(config["config"].get("rollouts"), None, "{config}");
    let next = ROLLOUT.replace("chat-v2", "chat-v3");
    let (status, body) = call(&api, Method::POST, "/v1/rollouts", &next).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // The finished one is listed with its final state, beside the new one.
    let (_, list) = call(&api, Method::GET, "/v1/rollouts", "").await;
    let states: Vec<(&str, &str)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states, [("chat-v2", "rolled_back"), ("chat-v3", "pending")]);
    let (status, old) = call(&api, Method::GET, "/v1/rollouts/chat-v2", "").await;
    assert_eq!((status, old["weight"].clone()), (StatusCode::OK, json!(0)));
    let last = old["events"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["to"], "rolled_back");
    // Its name stays taken until it is deleted; the config still allows
    // one rollout per route.
    let (status, body) = call(&api, Method::POST, "/v1/rollouts", ROLLOUT).await;
    assert_eq!(
        (status, body),
        (
            StatusCode::CONFLICT,
            json!({"error": "rollout `chat-v2` has finished (rolled_back); delete it to reuse the name",
                   "path": "name"})
        )
    );
    let (status, body) = call(&api, Method::DELETE, "/v1/rollouts/chat-v2", "").await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({"removed": "chat-v2"}))
    );
    let (status, _) = call(&api, Method::GET, "/v1/rollouts/chat-v2", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = call(&api, Method::POST, "/v1/rollouts", ROLLOUT).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["errors"][0],
        json!({"path": "route", "message": "route `chat` already has rollout `chat-v3` (rollouts[0])"})
    );
    let (_, list) = call(&api, Method::GET, "/v1/rollouts", "").await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    let metrics = shared.metrics.encode();
    assert!(!metrics.contains(r#"rollout="chat-v2""#), "{metrics}");
    assert!(
        metrics.contains(r#"sluice_rollout_weight{rollout="chat-v3"}"#),
        "{metrics}"
    );
    cancel.cancel();
    for t in tasks {
        t.await.unwrap();
    }
}
