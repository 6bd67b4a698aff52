#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::StatusCode;
use serde_json::{json, Value};
use sluice_filters::{Direction, FaultAction, Toxic};

use super::proxies::{Answer, Toxiproxy};
use super::TcpListeners;
use crate::testing;

/// Listeners that only say what they were asked: opens get ports from 40000 up,
/// an address already open is refused.
#[derive(Default)]
struct FakeListeners {
    calls: Mutex<Vec<String>>,
    open: Mutex<Vec<(String, SocketAddr)>>,
}

impl TcpListeners for FakeListeners {
    fn open(&self, listener: &str, listen: &str, upstream: &str) -> Result<SocketAddr, String> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("open {listener} {listen} {upstream}"));
        let mut open = self.open.lock().unwrap();
        let asked: SocketAddr = listen.parse().map_err(|_| "unresolvable".to_string())?;
        let addr = if asked.port() == 0 {
            SocketAddr::from(([127, 0, 0, 1], 40000 + open.len() as u16))
        } else {
            asked
        };
        if open.iter().any(|(_, a)| *a == addr) {
            return Err("address already in use".into());
        }
        open.push((listener.to_string(), addr));
        Ok(addr)
    }

    fn close(&self, listener: &str) {
        self.calls.lock().unwrap().push(format!("close {listener}"));
        self.open.lock().unwrap().retain(|(l, _)| l != listener);
    }
}

const CONFIG: &str = "listeners:
  - { name: cache, listen: 127.0.0.1:16380, protocol: tcp, cluster: redis }
clusters:
  - { name: redis, kind: cache, endpoints: [127.0.0.1:16379] }
";

fn api() -> (
    Toxiproxy,
    Arc<FakeListeners>,
    Arc<crate::store::SnapshotStore>,
    crate::Shared,
) {
    let (store, shared) = testing::store(CONFIG);
    let listeners = Arc::new(FakeListeners::default());
    let api = Toxiproxy::new(
        listeners.clone(),
        store.clone(),
        shared.events.clone(),
        Duration::from_secs(600),
    );
    (api, listeners, store, shared)
}

fn body(answer: &Answer) -> Value {
    answer.body.clone().unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_proxy_listens_where_it_was_bound_and_goes_down_and_up() {
    let (api, listeners, _, shared) = api();
    let created = api
        .create(&json!({"name": "redis", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:6379"}));
    assert_eq!(created.status, StatusCode::CREATED);
    assert_eq!(
        body(&created),
        json!({"name": "redis", "listen": "127.0.0.1:40000", "upstream": "127.0.0.1:6379",
               "enabled": true, "toxics": []})
    );
    let again = api.create(&json!({"name": "redis", "upstream": "127.0.0.1:6379"}));
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert_eq!(
        body(&again),
        json!({"error": "proxy already exists", "status": 409})
    );

    let down = api.update("redis", &json!({"enabled": false}));
    assert_eq!(down.status, StatusCode::OK);
    assert_eq!(body(&down)["enabled"], json!(false));
    // Up again on the port it had, not on a new port 0.
    let up = api.update("redis", &json!({"enabled": true}));
    assert_eq!(body(&up)["listen"], json!("127.0.0.1:40000"));
    assert_eq!(
        *listeners.calls.lock().unwrap(),
        [
            "open toxiproxy:redis 127.0.0.1:0 127.0.0.1:6379",
            "close toxiproxy:redis",
            "open toxiproxy:redis 127.0.0.1:40000 127.0.0.1:6379",
        ]
    );
    let listed = body(&api.list());
    assert_eq!(listed["redis"]["enabled"], json!(true));
    assert_eq!(api.show("nope").status, StatusCode::NOT_FOUND);
    assert_eq!(
        body(&api.show("nope")),
        json!({"error": "proxy not found", "status": 404})
    );

    let deleted = api.delete("redis");
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert!(listeners.open.lock().unwrap().is_empty());
    let actions: Vec<String> = shared
        .events
        .list()
        .iter()
        .filter(|e| e.source == "toxiproxy")
        .map(|e| e.action.clone())
        .collect();
    assert_eq!(
        actions,
        [
            "create proxy redis (127.0.0.1:40000 -> 127.0.0.1:6379)",
            "update proxy redis (down, -> 127.0.0.1:6379)",
            "update proxy redis (up, -> 127.0.0.1:6379)",
            "delete proxy redis",
        ]
    );
}

#[tokio::test]
async fn a_toxic_is_an_experiment_on_the_proxy_listener() {
    let (api, _, store, _) = api();
    api.create(&json!({"name": "redis", "upstream": "127.0.0.1:6379"}));
    let added = api.add_toxic(
        "redis",
        &json!({"type": "latency", "toxicity": 0.5, "attributes": {"latency": 200, "jitter": 5}}),
    );
    assert_eq!(added.status, StatusCode::OK);
    assert_eq!(body(&added)["name"], json!("latency_downstream"));
    let snapshot = store.load();
    let [fault] = snapshot.faults.as_slice() else {
        panic!("one experiment: {:?}", snapshot.faults.len());
    };
    let e = &fault.experiment;
    assert!(e.id.starts_with("toxiproxy-"), "{}", e.id);
    assert_eq!(e.matcher.listener.as_deref(), Some("toxiproxy:redis"));
    assert_eq!(e.percent, 50.0);
    assert_eq!(e.ttl, Duration::from_secs(600));
    assert_eq!(
        e.action,
        FaultAction::Tcp(Toxic::Latency {
            latency: Duration::from_millis(200),
            jitter: Duration::from_millis(5),
            direction: Direction::Downstream,
        })
    );
    let dup = api.add_toxic(
        "redis",
        &json!({"type": "latency", "attributes": {"latency": 1}}),
    );
    assert_eq!(
        body(&dup),
        json!({"error": "toxic already exists", "status": 409})
    );
    let bad = api.add_toxic(
        "redis",
        &json!({"type": "bandwidth", "attributes": {"rate": 0}}),
    );
    assert_eq!(
        body(&bad),
        json!({"error": "bad request body: attributes.rate: must be at least 1 (KB/s)", "status": 400})
    );
    assert_eq!(
        body(&api.add_toxic("nope", &json!({"type": "timeout"}))),
        json!({"error": "proxy not found", "status": 404})
    );

    // An update replaces the experiment with the new attributes.
    let updated = api.update_toxic(
        "redis",
        "latency_downstream",
        &json!({"attributes": {"latency": 300}}),
    );
    assert_eq!(
        body(&updated)["attributes"],
        json!({"latency": 300, "jitter": 5})
    );
    let snapshot = store.load();
    assert_eq!(snapshot.faults.len(), 1);
    assert!(matches!(
        snapshot.faults[0].experiment.action,
        FaultAction::Tcp(Toxic::Latency { latency, .. }) if latency == Duration::from_millis(300)
    ));

    // Removed through the control API, the toxic is gone from Toxiproxy's too.
    let id = snapshot.faults[0].experiment.id.clone();
    store
        .apply_config("api", "remove", |c| {
            Ok(c.without_fault(&id).expect("the toxic's experiment"))
        })
        .unwrap();
    assert_eq!(body(&api.toxics("redis")), json!([]));
    assert_eq!(
        body(&api.toxic("redis", "latency_downstream")),
        json!({"error": "toxic not found", "status": 404})
    );
}

#[tokio::test]
async fn reset_removes_every_toxic_and_enables_every_proxy() {
    let (api, _, store, _) = api();
    api.create(&json!({"name": "a", "upstream": "127.0.0.1:1"}));
    api.create(&json!({"name": "b", "upstream": "127.0.0.1:2", "enabled": false}));
    api.add_toxic(
        "a",
        &json!({"type": "timeout", "attributes": {"timeout": 100}}),
    );
    api.add_toxic(
        "a",
        &json!({"type": "limit_data", "stream": "upstream", "attributes": {"bytes": 10}}),
    );
    assert_eq!(store.load().faults.len(), 2);
    assert_eq!(api.reset().status, StatusCode::NO_CONTENT);
    assert!(store.load().faults.is_empty());
    let listed = body(&api.list());
    assert_eq!(listed["a"]["toxics"], json!([]));
    assert_eq!(listed["b"]["enabled"], json!(true));
}

#[tokio::test]
async fn populate_replaces_what_differs_and_keeps_what_does_not() {
    let (api, listeners, store, _) = api();
    api.create(&json!({"name": "same", "listen": "127.0.0.1:7001", "upstream": "127.0.0.1:1"}));
    api.create(&json!({"name": "moved", "listen": "127.0.0.1:7002", "upstream": "127.0.0.1:2"}));
    api.add_toxic("same", &json!({"type": "timeout"}));
    api.add_toxic("moved", &json!({"type": "timeout"}));
    let populated = api.populate(&json!([
        {"name": "same", "listen": "127.0.0.1:7001", "upstream": "127.0.0.1:1"},
        {"name": "moved", "listen": "127.0.0.1:7002", "upstream": "127.0.0.1:3"},
        {"name": "new", "listen": "127.0.0.1:7003", "upstream": "127.0.0.1:4"},
    ]));
    assert_eq!(populated.status, StatusCode::CREATED);
    let populated = body(&populated);
    let names: Vec<&str> = populated["proxies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["same", "moved", "new"]);
    let listed = body(&api.list());
    assert_eq!(listed["same"]["toxics"].as_array().unwrap().len(), 1);
    assert_eq!(listed["moved"]["toxics"], json!([]));
    assert_eq!(listed["moved"]["upstream"], json!("127.0.0.1:3"));
    assert_eq!(store.load().faults.len(), 1);
    assert_eq!(listeners.open.lock().unwrap().len(), 3);
    assert_eq!(
        body(&api.populate(&json!([{"name": "x"}]))),
        json!({"error": "bad request body: [0].upstream: required", "status": 400})
    );
    assert_eq!(
        body(&api.populate(&json!({"name": "x"}))),
        json!({"error": "bad request body: must be a JSON array of proxies", "status": 400})
    );
}
