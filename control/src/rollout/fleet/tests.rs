//! Applying weights to every target: a tiny fake control API on
//! 127.0.0.1:0 that fails the first N writes, the round-by-round record,
//! and a rollout in fleet mode driving two of them through the real
//! registry and controller.
// Tests may spawn bare tasks (each test's runtime ends with it) and read std time.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::events::EventLog;
use crate::rollout::{Command, Rollouts, State};
use crate::testing::{self, stable_canary};

mod reconcile;

pub(super) const TOKEN_ENV: &str = "SLUICE_FLEET_UNIT_TOKEN";
pub(super) const TOKEN: &str = "fleet-secret";

#[derive(Default)]
struct FakeState {
    split: BTreeMap<String, u32>,
    /// Writes still to answer 503.
    fail: u32,
    /// Every write that reached it, failed or not.
    writes: u32,
}

/// A control API with one route, `chat`; stops on drop.
pub(super) struct FakeApi {
    addr: SocketAddr,
    state: Arc<Mutex<FakeState>>,
    stop: CancellationToken,
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl FakeApi {
    pub(super) async fn start(fail: u32) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(FakeState {
            split: BTreeMap::from([
                ("stable".into(), 100),
                ("canary".into(), 0),
                ("other".into(), 7),
            ]),
            fail,
            writes: 0,
        }));
        let stop = CancellationToken::new();
        let (s, cancel) = (state.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let stream = tokio::select! {
                    () = cancel.cancelled() => return,
                    accepted = listener.accept() => accepted.unwrap().0,
                };
                let s = s.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(s.clone(), req));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        FakeApi { addr, state, stop }
    }

    pub(super) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub(super) fn split(&self) -> BTreeMap<String, u32> {
        self.state.lock().unwrap().split.clone()
    }

    /// A hand on its API: the split set behind the controller's back.
    pub(super) fn set_split(&self, split: BTreeMap<String, u32>) {
        self.state.lock().unwrap().split = split;
    }

    fn writes(&self) -> u32 {
        self.state.lock().unwrap().writes
    }
}

async fn handle(
    state: Arc<Mutex<FakeState>>,
    req: http::Request<Incoming>,
) -> Result<Response<Full<bytes::Bytes>>, Infallible> {
    let reply = |status: StatusCode, body: Value| {
        Ok(Response::builder()
            .status(status)
            .body(Full::from(body.to_string()))
            .unwrap())
    };
    let auth = req.headers().get("authorization").cloned();
    if auth.as_ref().and_then(|v| v.to_str().ok()) != Some(&format!("Bearer {TOKEN}")) {
        return reply(StatusCode::UNAUTHORIZED, json!({"error": "unauthorized"}));
    }
    let (method, path) = (req.method().clone(), req.uri().path().to_string());
    let body = req.into_body().collect().await.unwrap().to_bytes();
    let mut s = state.lock().unwrap();
    match (method.as_str(), path.as_str()) {
        ("GET", "/v1/routes") => reply(
            StatusCode::OK,
            json!([{"name": "chat", "listener": "public", "split": s.split}]),
        ),
        ("PUT", "/v1/routes/chat/split") => {
            s.writes += 1;
            if s.fail > 0 {
                s.fail -= 1;
                return reply(StatusCode::SERVICE_UNAVAILABLE, json!({"error": "busy"}));
            }
            s.split = serde_json::from_slice(&body).unwrap();
            reply(StatusCode::OK, json!({"route": "chat", "split": s.split}))
        }
        _ => reply(StatusCode::NOT_FOUND, json!({"error": "not found"})),
    }
}

fn job(urls: &[String], weight: u32, token_env: &str) -> Job {
    Job {
        urls: urls.to_vec(),
        route: "chat".into(),
        stable: "stable".into(),
        canary: "canary".into(),
        weight,
        token_env: token_env.into(),
        fanout: crate::config::Fanout {
            concurrency: 64,
            timeout: Duration::from_secs(2),
        },
    }
}

pub(super) fn split(stable: u32, canary: u32) -> BTreeMap<String, u32> {
    BTreeMap::from([
        ("stable".into(), stable),
        ("canary".into(), canary),
        ("other".into(), 7),
    ])
}

#[test]
fn a_round_records_who_took_the_weight_and_reports_a_failure_once() {
    let urls = ["http://a".to_string(), "http://b".to_string()];
    let mut t = Targets::new(&urls);
    assert_eq!(t.due(), urls);
    t.want();
    let ok = |u: &str| (u.to_string(), Ok(Applied::Written));
    let err = |u: &str| (u.to_string(), Err("refused".to_string()));
    let r = t.record(5, Some(5), vec![ok("http://a"), err("http://b")]);
    assert_eq!(
        (r.failed, r.first_failures),
        (1, vec!["http://b: refused".to_string()])
    );
    assert_eq!(t.due(), ["http://b"]);
    // The same failure again: counted, not reported again.
    let r = t.record(5, Some(5), vec![err("http://b")]);
    assert_eq!((r.failed, r.first_failures.len()), (1, 0));
    assert_eq!(t.status()[1].failures, 2);
    assert_eq!(t.status()[1].error.as_deref(), Some("refused"));
    // Taken while the rollout already wants another weight: still due.
    let r = t.record(5, Some(0), vec![ok("http://b")]);
    assert_eq!(r, Round::default());
    assert_eq!(t.due(), ["http://b"]);
    assert_eq!(t.status()[1].weight, Some(5));
    t.record(0, Some(0), vec![ok("http://b")]);
    assert!(t.due().is_empty());

    // A changed list keeps the state of the targets still in it.
    assert!(t.follow(&["http://b".to_string(), "http://c".to_string()]));
    assert_eq!(t.due(), ["http://c"]);
    assert_eq!(t.status()[0].weight, Some(0));
    assert!(!t.follow(&["http://b".to_string(), "http://c".to_string()]));
}

#[tokio::test]
async fn a_failing_target_is_retried_and_other_clusters_keep_their_weights() {
    std::env::set_var(TOKEN_ENV, TOKEN);
    let (good, flaky) = (FakeApi::start(0).await, FakeApi::start(2).await);
    let urls = [good.url(), flaky.url()];
    let pusher = Pusher::new();

    let results = pusher.push(&job(&urls, 20, TOKEN_ENV)).await;
    let by_url: BTreeMap<_, _> = results.into_iter().collect();
    assert_eq!(by_url[&good.url()], Ok(Applied::Written));
    assert_eq!(
        by_url[&flaky.url()],
        Err(
            "PUT /v1/routes/chat/split answered 503 Service Unavailable: {\"error\":\"busy\"}"
                .into()
        )
    );
    assert_eq!(good.split(), split(80, 20));
    assert_eq!(flaky.split(), split(100, 0));

    // The good one is not written again when it already has the weight.
    let results = pusher.push(&job(&urls, 20, TOKEN_ENV)).await;
    assert_eq!(good.writes(), 1);
    assert!(results.iter().any(|(u, r)| *u == flaky.url() && r.is_err()));
    let results = pusher.push(&job(&urls, 20, TOKEN_ENV)).await;
    let by_url: BTreeMap<_, _> = results.into_iter().collect();
    assert_eq!(by_url[&good.url()], Ok(Applied::Unchanged));
    assert_eq!(by_url[&flaky.url()], Ok(Applied::Written));
    assert_eq!(flaky.split(), split(80, 20));
    assert_eq!(flaky.writes(), 3);
}

#[tokio::test]
async fn calls_say_what_went_wrong() {
    std::env::set_var(TOKEN_ENV, TOKEN);
    let api = FakeApi::start(0).await;
    let pusher = Pusher::new();
    let one = |r: Vec<(String, Result<Applied, String>)>| r.into_iter().next().unwrap().1;

    let missing = one(pusher
        .push(&job(&[api.url()], 0, "SLUICE_FLEET_UNIT_UNSET"))
        .await);
    assert_eq!(
        missing,
        Err("token variable `SLUICE_FLEET_UNIT_UNSET` is not set".into())
    );
    std::env::set_var("SLUICE_FLEET_UNIT_WRONG", "nope");
    let wrong = one(pusher
        .push(&job(&[api.url()], 0, "SLUICE_FLEET_UNIT_WRONG"))
        .await);
    assert_eq!(
        wrong,
        Err("GET /v1/routes answered 401 Unauthorized: {\"error\":\"unauthorized\"}".into())
    );
    let mut j = job(&[api.url()], 0, TOKEN_ENV);
    j.route = "nope".into();
    assert_eq!(
        one(pusher.push(&j).await),
        Err("no route `nope` there".into())
    );
    // A port nobody listens on.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let refused = one(pusher.push(&job(&[dead], 0, TOKEN_ENV)).await).unwrap_err();
    assert!(refused.starts_with("GET /v1/routes: "), "{refused}");
    assert!(refused.contains("onnection refused"), "{refused}");
}

/// A rollout with two targets, one failing its first three writes: the
/// start and an operator's abort reach both, the abort counts as applied
/// only once the flaky one took it, and the audit log says so.
#[tokio::test]
async fn a_fleet_rollout_applies_every_change_to_every_target() {
    std::env::set_var(TOKEN_ENV, TOKEN);
    let (good, flaky) = (FakeApi::start(0).await, FakeApi::start(3).await);
    let yaml = format!(
        "{}rollouts:\n  - {{ name: chat-v2, route: chat, stable: stable, canary: canary, \
         steps: [10, 100], interval: 20ms, gates: {{ ttft_p95: 1s }}, \
         targets: [{}, {}], target_token_env: {TOKEN_ENV} }}\n",
        stable_canary(),
        good.url(),
        flaky.url()
    );
    let (store, shared) = testing::store(&yaml);
    let rollouts = Rollouts::new(
        store.clone(),
        shared.clone(),
        crate::observers::Observers::default(),
    );
    let cancel = CancellationToken::new();
    let task = tokio::spawn(rollouts.clone().run(cancel.clone()));

    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while flaky.split() != split(90, 10) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "step 1 never reached the flaky target"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(good.split(), split(90, 10));
    // The fake API stores the split before it answers, so the controller
    // records "applied" a moment after the split is visible here.
    wait_for_audit(
        &shared.events,
        "rollout chat-v2: weight 10 applied on all 2 target(s)",
    )
    .await;
    let status = rollouts.status("chat-v2").unwrap();
    assert_eq!((status.state, status.weight), (State::Progressing, 10));
    // The local split is not the rollout's in fleet mode.
    assert_eq!(store.load().config.raw.routes[0].split["canary"], 0);

    rollouts.command("chat-v2", Command::Abort).unwrap();
    while flaky.split() != split(100, 0) || good.split() != split(100, 0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "abort never reached every target"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let audit: Vec<String> = shared
        .events
        .list()
        .into_iter()
        .map(|e| format!("{} {}", e.action, e.errors.join("; ")))
        .collect();
    let failed = format!(
        "rollout chat-v2: weight 10 not applied on 1 of 2 target(s); retrying {}: \
         PUT /v1/routes/chat/split answered 503 Service Unavailable: {{\"error\":\"busy\"}}",
        flaky.url()
    );
    assert!(audit.contains(&failed), "{audit:#?}");
    // The task ends once the abort is on every target.
    wait_for_audit(
        &shared.events,
        "rollout chat-v2: weight 0 applied on all 2 target(s)",
    )
    .await;
    let status = rollouts.status("chat-v2").unwrap();
    assert_eq!(status.state, State::Aborted);
    assert!(
        status
            .targets
            .iter()
            .all(|t| !t.pending && t.weight == Some(0)),
        "{:?}",
        status.targets
    );
    cancel.cancel();
    task.await.unwrap();
}

pub(super) async fn wait_for_audit(events: &EventLog, action: &str) {
    let recorded = || events.list().iter().any(|e| e.action == action);
    tokio::time::timeout(Duration::from_secs(5), async {
        while !recorded() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("`{action}` never recorded: {:#?}", events.list()));
}
