//! The bounds that keep one admin request from holding the control plane:
//! body nesting, the number of experiments (and that adding one does not
//! revalidate the others), the `GET` → `PUT /v1/config` round trip at the
//! limits, and rejected ids logged on one line.

use std::sync::{Arc as StdArc, Mutex as StdMutex};

use super::*;

fn fault(i: usize) -> String {
    format!(
        r#"{{"id": "d-{i}", "match": {{"route": "chat"}}, "ttl": "10m",
            "action": {{"delay": {{"delay": "1ms"}}}}}}"#
    )
}

#[tokio::test]
async fn a_body_nested_100000_deep_is_refused_at_once() {
    let s = Server::start().await;
    let deep = "{\"a\":".repeat(100_000) + "1" + &"}".repeat(100_000);
    let started = std::time::Instant::now();
    let (status, body) = s.json(Method::POST, "/v1/faults", &deep).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        body["error"],
        "body nests deeper than 64 levels (admin.max_body_depth)"
    );
    // Generous: the scan is linear; the parser took 30 s on this body.
    assert!(started.elapsed() < Duration::from_secs(5));

    // YAML block nesting counts as well, on every endpoint with a body.
    let block: String = (0..70).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
    let (status, body) = s.json(Method::PUT, "/v1/config", &block).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, _) = s.json(Method::PUT, "/v1/routes/chat/split", &deep).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // Health is answered meanwhile, and nothing changed.
    let (status, _, _) = s.call(Method::GET, "/healthz", None, "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(s.api.store.load().version, 1);
    s.stop().await;
}

#[tokio::test]
async fn experiments_past_max_experiments_are_refused_with_409() {
    let s = Server::start().await;
    let started = std::time::Instant::now();
    for i in 0..1000 {
        let (status, body) = s.json(Method::POST, "/v1/faults", &fault(i)).await;
        assert_eq!(status, StatusCode::CREATED, "{i}: {body}");
    }
    for i in 1000..1100 {
        let (status, body) = s.json(Method::POST, "/v1/faults", &fault(i)).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert_eq!(
            body,
            json!({"error": "1000 fault experiments are listed, the limit \
                    (runtime.max_experiments); remove one first", "path": "faults"})
        );
    }
    // Generous bound: 1,100 adds each validating one experiment, not all.
    assert!(started.elapsed() < Duration::from_secs(120));
    let snapshot = s.api.store.load();
    assert_eq!(snapshot.faults.len(), 1000);
    // Each route's requests see their own experiments only.
    assert_eq!(snapshot.faults_for(Some(0)).count(), 1000);
    assert_eq!(snapshot.faults_for(None).count(), 0);

    // Removing one makes room for one.
    let (status, _) = s.json(Method::DELETE, "/v1/faults/d-7", "").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = s.json(Method::POST, "/v1/faults", &fault(2000)).await;
    assert_eq!(status, StatusCode::CREATED);

    // A whole config over the limit is refused with the limit named.
    let (_, mut config) = s.json(Method::GET, "/v1/config", "").await;
    let faults = config["config"]["faults"].as_array_mut().unwrap();
    faults.push(serde_json::from_str(&fault(3000)).unwrap());
    let (status, body) = s
        .json(Method::PUT, "/v1/config", &config["config"].to_string())
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["errors"],
        json!([{"path": "faults",
                "message": "1001 experiments, over runtime.max_experiments (1000)"}])
    );
    s.stop().await;
}

#[tokio::test]
async fn get_config_puts_back_with_as_many_experiments_as_the_limits_allow() {
    let s = Server::start().await;
    let (_, config) = s.json(Method::GET, "/v1/config", "").await;
    let mut config = config["config"].clone();
    // 1,000 experiments (max_experiments) of almost 8 KiB each (the most
    // one may take): far over the 1 MiB the API used to accept.
    let padding = "x".repeat(7900);
    let faults: Vec<Value> = (0..1000)
        .map(|i| {
            json!({"id": format!("big-{i}"), "ttl": "10m",
                   "match": {"route": "chat", "headers": {"x-pad": padding}},
                   "action": {"delay": {"delay": "1ms"}}})
        })
        .collect();
    config["faults"] = Value::Array(faults);
    let (status, body) = s.json(Method::PUT, "/v1/config", &config.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let (status, headers, bytes) = s.call(Method::GET, "/v1/config", Some(TOKEN), "").await;
    assert_eq!(status, StatusCode::OK, "{headers:?}");
    assert!(bytes.len() > 8_000_000, "{}", bytes.len());
    let got: Value = serde_json::from_slice(&bytes).unwrap();
    let (status, body) = s
        .json(Method::PUT, "/v1/config", &got["config"].to_string())
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["hash"], got["hash"]);

    // An experiment over 8 KiB is refused, naming it.
    let mut over = got["config"].clone();
    over["faults"][3]["match"]["headers"]["x-pad"] = json!("x".repeat(8192));
    let (status, body) = s.json(Method::PUT, "/v1/config", &over.to_string()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let message = body["errors"][0]["message"].as_str().unwrap();
    assert_eq!(body["errors"][0]["path"], "faults[3]");
    assert!(
        message.ends_with("bytes as JSON, over the 8192 an experiment may take"),
        "{message}"
    );
    s.stop().await;
}

/// A writer the test reads back: what the log said.
#[derive(Clone, Default)]
struct Captured(StdArc<StdMutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_newline_in_a_rejected_id_is_escaped_in_the_log() {
    let (store, _shared) = testing::store(&testing::ab_chat(""));
    let log = Captured::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let body = r#"{"id": "evil\nINFO forged line\r", "ttl": "1m",
                   "action": {"delay": {"delay": "1ms"}}}"#;
    let answer = tracing::subscriber::with_default(subscriber, || {
        crate::api::faults::add(&store, body.as_bytes())
    });
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].contains("config change rejected"), "{text}");
    assert!(
        lines[0].contains(r"add fault evil\nINFO forged line\r"),
        "{text}"
    );
}
