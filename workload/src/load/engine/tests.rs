#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use sluice_filters::TraceContext;

use super::*;
use crate::load::summary::{summarize, Goodput, Lineage, RunInfo, RunReport};

/// A request's `traceparent`, `x-sluice-load` and path.
type Seen = (Option<String>, Option<String>, String);

/// A loopback HTTP/1.1 server that answers `ok` at once, but for the
/// `stall_at`-th request (from 0), which it holds for `stall`. It keeps
/// the load headers of every request. Stops with its thread's runtime.
struct TestServer {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    count: Arc<AtomicU64>,
    _runtime: tokio::runtime::Runtime,
}

impl TestServer {
    /// The paths of the requests seen, in arrival order.
    fn paths(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.2.clone())
            .collect()
    }
}

fn server(stall_at: u64, stall: Duration) -> TestServer {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let count = Arc::new(AtomicU64::new(0));
    let (s, c) = (seen.clone(), count.clone());
    runtime.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let (s, c) = (s.clone(), c.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (s, c) = (s.clone(), c.clone());
                    async move {
                        let header = |n: &str| {
                            req.headers()
                                .get(n)
                                .and_then(|v| v.to_str().ok())
                                .map(str::to_owned)
                        };
                        let path = req.uri().path().to_owned();
                        s.lock().unwrap().push((
                            header("traceparent"),
                            header("x-sluice-load"),
                            path.clone(),
                        ));
                        if c.fetch_add(1, Ordering::AcqRel) == stall_at {
                            tokio::time::sleep(stall).await;
                        }
                        let body: &'static [u8] = if path == "/json" {
                            br#"{"ids": ["doc-7", "doc-9"]}"#
                        } else {
                            b"ok"
                        };
                        let mut response =
                            hyper::Response::new(Full::new(Bytes::from_static(body)));
                        if req.uri().path() == "/fail" {
                            *response.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
                        }
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    TestServer {
        addr,
        seen,
        count,
        _runtime: runtime,
    }
}

fn scenario(addr: SocketAddr, rate: u32, secs: u32, max_in_flight: u32) -> Scenario {
    let text = format!(
        "scenario: stall\n\
         target: {{ base_url: 'http://{addr}' }}\n\
         workload: {{ arrival: {{ kind: constant, rate: {rate} }}, duration: {secs}s, \
           max_in_flight: {max_in_flight}, seed: 1 }}\n\
         steps: [ {{ name: ping, service: http, path: /ping, timeout: 5s }} ]\n"
    );
    Scenario::from_yaml(&text, Path::new("."), &|_| None).unwrap()
}

fn report(s: &Scenario, out: &RunOutput) -> RunReport {
    summarize(
        s,
        out,
        RunInfo {
            run_id: "test-run".into(),
            shard: "0/1".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            lineage: Lineage {
                scenario_sha256: String::new(),
                target: s.target.base_url.clone(),
                sluice_version: "test".into(),
                from_model: None,
                id: None,
                parents: Vec::new(),
            },
            goodput: Goodput::default(),
            detailed: false,
        },
    )
}

fn options(closed: Option<usize>) -> RunOptions {
    RunOptions {
        closed,
        drain: Duration::from_secs(5),
        run_id: "test-run".into(),
        threads: 2,
    }
}

fn metric(r: &RunReport, name: &str) -> f64 {
    *r.summary
        .metrics
        .get(name)
        .unwrap_or_else(|| panic!("no {name}"))
}

/// wrk2's point: a stall of 500 ms, with one request in flight at a time,
/// holds up every request scheduled during it. Measured from the intended
/// time (open loop) it shows; measured from the send (service time), and in
/// a closed loop, it does not.
#[test]
fn an_open_loop_shows_the_stall_that_service_time_and_a_closed_loop_hide() {
    let srv = server(50, Duration::from_millis(500));
    let s = scenario(srv.addr, 100, 2, 1);
    let schedule = s.plan.schedule().unwrap();
    assert_eq!(schedule.arrivals.len(), 200);
    let out = run(&s, &schedule, &options(None), Arc::new(Live::default())).unwrap();
    let r = report(&s, &out);
    assert_eq!(r.summary.requests, 200);
    assert_eq!(r.summary.completed, 200);
    assert_eq!(r.mode, "open");
    // About 50 requests were due during the stall: they waited for the slot.
    assert!(r.dispatch.queued >= 20, "queued {}", r.dispatch.queued);
    assert!(metric(&r, "p99_e2el_ms") > 300.0, "{:?}", r.summary.metrics);
    assert!(
        metric(&r, "p99_service_time_ms") < 100.0,
        "{:?}",
        r.summary.metrics
    );
    assert!(
        metric(&r, "p99_dispatch_lag_ms") > 300.0,
        "{:?}",
        r.summary.metrics
    );
    // Every request carried a traceparent and the run's id.
    let seen = srv.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 200);
    for (traceparent, run_id, _) in &seen {
        assert!(TraceContext::parse(traceparent.as_deref().unwrap().as_bytes()).is_some());
        assert_eq!(run_id.as_deref(), Some("test-run"));
    }

    // The closed loop: one user, the same stall once; its p99 hides it.
    let srv = server(50, Duration::from_millis(500));
    let s = scenario(srv.addr, 100, 2, 1);
    let out = run(&s, &schedule, &options(Some(1)), Arc::new(Live::default())).unwrap();
    let r = report(&s, &out);
    assert_eq!(r.mode, "closed");
    assert_eq!(r.dispatch.queued, 0);
    assert!(r.summary.completed > 200, "{}", r.summary.completed);
    assert!(metric(&r, "p99_e2el_ms") < 100.0, "{:?}", r.summary.metrics);
    assert!(
        metric(&r, "max_e2el_ms") >= 500.0,
        "{:?}",
        r.summary.metrics
    );
    assert!(srv.count.load(Ordering::Acquire) > 200);
}

/// A dense schedule, where the runtime claims arrivals at the ends of
/// requests and the timer thread wakes once a window: every arrival runs
/// exactly once, and none is sent before its intended time.
#[test]
fn a_dense_schedule_runs_every_arrival_once_and_none_early() {
    let srv = server(u64::MAX, Duration::ZERO);
    let s = scenario(srv.addr, 5_000, 1, 256);
    let schedule = s.plan.schedule().unwrap();
    assert_eq!(schedule.arrivals.len(), 5_000);
    let mut o = options(None);
    o.drain = Duration::from_secs(30);
    let out = run(&s, &schedule, &o, Arc::new(Live::default())).unwrap();
    assert_eq!(out.journeys, 5_000);
    assert_eq!((out.cut_in_flight, out.cut_waiting), (0, 0));
    let mut indices: Vec<u64> = out.outcomes.iter().map(|o| o.index).collect();
    indices.sort_unstable();
    let all: Vec<u64> = (0..5_000).collect();
    assert_eq!(indices, all, "each arrival once");
    for o in &out.outcomes {
        assert!(o.failure.is_none(), "{o:?}");
        assert!(o.sent_us >= o.intended_us, "sent early: {o:?}");
    }
    assert_eq!(srv.count.load(Ordering::Acquire), 5_000);
}

/// A target that never answers in time: the drain ends, and what is left
/// is reported as cut (in flight, and waiting for a slot), not dropped.
#[test]
fn requests_left_at_the_end_of_the_drain_are_counted_as_cut() {
    let srv = server(0, Duration::from_secs(30));
    let s = scenario(srv.addr, 10, 1, 1);
    let schedule = s.plan.schedule().unwrap();
    let mut o = options(None);
    o.drain = Duration::from_millis(200);
    let out = run(&s, &schedule, &o, Arc::new(Live::default())).unwrap();
    let r = report(&s, &out);
    assert_eq!(r.dispatch.journeys, 10);
    assert_eq!(r.dispatch.cut_in_flight, 1);
    assert_eq!(r.dispatch.cut_waiting, 9);
    assert_eq!(r.summary.requests, 0);
    assert!(out.elapsed < Duration::from_secs(5));
}

/// A session of 3 turns of two steps: the second step starts its delay
/// after the first ends, and each turn its think time after the last.
#[test]
fn sessions_run_their_turns_and_steps_after_think_time_and_delay() {
    let srv = server(u64::MAX, Duration::ZERO);
    let text = format!(
        "scenario: sessions\n\
         target: {{ base_url: 'http://{}' }}\n\
         workload: {{ arrival: {{ kind: poisson, rate: 10 }}, duration: 1s, seed: 4 }}\n\
         sessions: {{ turns: 3, think_time: 100ms }}\n\
         steps:\n\
         \x20 - {{ name: search, service: http, path: /search }}\n\
         \x20 - {{ name: answer, service: http, method: POST, path: '/answer/{{{{q}}}}',\n\
         \x20     body: {{ q: '{{{{q}}}}' }}, depends_on: search, delay: 50ms }}\n\
         data: {{ q: {{ values: [x, y], order: sequential }} }}\n",
        srv.addr
    );
    let s = Scenario::from_yaml(&text, Path::new("."), &|_| None).unwrap();
    let schedule = s.plan.schedule().unwrap();
    let n = schedule.arrivals.len();
    assert!(n > 0);
    let out = run(&s, &schedule, &options(None), Arc::new(Live::default())).unwrap();
    assert_eq!(out.outcomes.len(), n * 6);
    assert_eq!(srv.count.load(Ordering::Acquire), (n * 6) as u64);
    for a in &schedule.arrivals {
        let mut mine: Vec<&Outcome> = out.outcomes.iter().filter(|o| o.index == a.index).collect();
        mine.sort_by_key(|o| o.intended_us);
        let steps: Vec<usize> = mine.iter().map(|o| o.step).collect();
        assert_eq!(steps, [0, 1, 0, 1, 0, 1]);
        // The first request's intended time is the schedule's.
        assert_eq!(mine[0].intended_us, a.at_us);
        for w in mine.windows(2) {
            let wait = w[1].intended_us - w[0].end_us;
            // 50 ms of delay within a turn, 100 ms of think time between.
            let want = if w[1].step == 1 { 50_000 } else { 100_000 };
            assert_eq!(wait, want);
            assert!(w[0].status == Some(200) && w[0].failure.is_none());
        }
    }
}

/// Ctrl-C sets `stop`: dispatching ends, what was sent drains, and the
/// result is marked interrupted.
#[test]
fn a_stop_ends_the_run_early_and_marks_it_interrupted() {
    let srv = server(u64::MAX, Duration::ZERO);
    let s = scenario(srv.addr, 10, 30, 4);
    let schedule = s.plan.schedule().unwrap();
    let live = Arc::new(Live::default());
    let stopper = {
        let live = live.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(350));
            live.stop.store(true, Ordering::Release);
        })
    };
    let out = run(&s, &schedule, &options(None), live).unwrap();
    stopper.join().unwrap();
    assert!(out.interrupted);
    assert!((300_000..2_000_000).contains(&out.ran_us), "{}", out.ran_us);
    assert_eq!(out.span_us, 30_000_000);
    // 3 arrivals by 350 ms (at 100, 200, 300 ms), give or take the wake-up.
    assert!((2..=5).contains(&out.journeys), "{}", out.journeys);
    assert_eq!(out.outcomes.len() as u64, out.journeys);
    assert!(out.elapsed < Duration::from_secs(5), "{:?}", out.elapsed);
    let r = report(&s, &out);
    assert!(r.interrupted);
    assert_eq!(r.exit_code(), 130);
}

/// `when:` sends a step only when the step it names ended so: after a 500,
/// the `error` branch runs and the `ok` branch does not.
#[test]
fn when_follows_how_the_step_before_ended() {
    let srv = server(u64::MAX, Duration::ZERO);
    let text = format!(
        "scenario: when\n\
         target: {{ base_url: 'http://{}' }}\n\
         workload: {{ arrival: {{ kind: constant, rate: 20 }}, duration: 1s }}\n\
         steps:\n\
         \x20 - {{ name: a, service: http, path: /fail }}\n\
         \x20 - {{ name: on_error, service: http, path: /e, depends_on: a, when: a.error }}\n\
         \x20 - {{ name: on_ok, service: http, path: /o, depends_on: a, when: a.ok }}\n\
         \x20 - {{ name: after_ok, service: http, path: /x, depends_on: on_ok, when: on_ok.ok }}\n",
        srv.addr
    );
    let s = Scenario::from_yaml(&text, Path::new("."), &|_| None).unwrap();
    let schedule = s.plan.schedule().unwrap();
    let out = run(&s, &schedule, &options(None), Arc::new(Live::default())).unwrap();
    let per_step = |k: usize| out.outcomes.iter().filter(|o| o.step == k).count();
    assert_eq!(
        [per_step(0), per_step(1), per_step(2), per_step(3)],
        [20, 20, 0, 0]
    );
    assert!(out
        .outcomes
        .iter()
        .filter(|o| o.step == 0)
        .all(|o| o.status == Some(500) && o.failure == Some(crate::load::client::Failure::Status)));
}

/// `extract` takes a value out of a JSON answer for the steps after it.
#[test]
fn extract_carries_a_value_of_one_answer_into_the_next_request() {
    let srv = server(u64::MAX, Duration::ZERO);
    let text = format!(
        "scenario: extract\n\
         target: {{ base_url: 'http://{}' }}\n\
         workload: {{ arrival: {{ kind: constant, rate: 10 }}, duration: 1s }}\n\
         steps:\n\
         \x20 - {{ name: search, service: http, path: /json, extract: {{ id: '$.ids[1]' }} }}\n\
         \x20 - {{ name: fetch, service: http, path: '/doc/{{{{id}}}}', depends_on: search }}\n",
        srv.addr
    );
    let s = Scenario::from_yaml(&text, Path::new("."), &|_| None).unwrap();
    let schedule = s.plan.schedule().unwrap();
    let out = run(&s, &schedule, &options(None), Arc::new(Live::default())).unwrap();
    assert_eq!(out.outcomes.len(), 20);
    let paths = srv.paths();
    assert_eq!(paths.iter().filter(|p| *p == "/json").count(), 10);
    assert_eq!(paths.iter().filter(|p| *p == "/doc/doc-9").count(), 10);
    let bad = text.replace("'$.ids[1]'", "'ids[1]'");
    assert_eq!(
        Scenario::from_yaml(&bad, Path::new("."), &|_| None)
            .unwrap_err()
            .to_string(),
        "steps[0].extract.id: `ids[1]` is not a path like $.a.b[0] (it starts with `$`)"
    );
    let bad = text.replace("{ id: '$.ids[1]' }", "{ 'a-b': '$.ids[1]' }");
    assert_eq!(
        Scenario::from_yaml(&bad, Path::new("."), &|_| None)
            .unwrap_err()
            .to_string(),
        "steps[0].extract.a-b: a variable name is letters, digits and `_`\n\
         steps[1].path: unknown variable `id` (known: a-b)"
    );
}

mod fulllink;
mod mixed;
mod perturb;
mod replay;
