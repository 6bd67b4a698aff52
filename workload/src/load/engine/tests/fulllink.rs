//! The full-link journey against a real `redis-server` and the loopback
//! HTTP server: a cache miss sends the search, its text is SET, and the
//! same query's next journeys hit; setup and teardown run once, outside
//! the summary, and a failing setup sends no load.

use std::process::{Child, Command, Stdio};

use super::*;
use crate::load::client::Cache;

/// `redis-server` on a free loopback port, killed on drop; `None` when it
/// is not installed.
struct RedisChild(Child, u16);

impl Drop for RedisChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn redis() -> Option<RedisChild> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let r = RedisChild(child, port);
    // Readiness polled: at most 10 s.
    for _ in 0..500 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some(r);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn get(port: u16, key: &str) -> Option<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        redis::cmd("GET")
            .arg(key)
            .query_async::<Option<String>>(&mut c)
            .await
            .unwrap()
    })
}

#[test]
fn a_miss_searches_and_stores_and_the_same_query_then_hits() {
    let Some(redis) = redis() else {
        // CI installs redis-server (scripts/install-deps.sh): a skip there hides a bug.
        assert!(
            std::env::var_os("CI").is_none(),
            "redis-server is missing in CI"
        );
        eprintln!("skipped: redis-server is not installed");
        return;
    };
    let srv = server(u64::MAX, Duration::ZERO);
    let text = format!(
        "scenario: rag\n\
         target: {{ base_url: 'http://127.0.0.1:1' }}\n\
         setup: [ {{ name: make, service: vector, method: POST, path: /json,\n\
         \x20  target: 'http://{a}', extract: {{ first: '$.ids[0]' }} }} ]\n\
         teardown: [ {{ name: drop, service: vector, method: DELETE, path: '/drop/{{{{first}}}}',\n\
         \x20  target: 'http://{a}' }} ]\n\
         workload: {{ arrival: {{ kind: constant, rate: 20 }}, duration: 1s }}\n\
         steps:\n\
         \x20 - {{ name: cache, service: redis, command: [GET, 'q:{{{{q_hash}}}}'], target: '127.0.0.1:{p}' }}\n\
         \x20 - {{ name: search, service: vector, method: POST, path: '/json', target: 'http://{a}',\n\
         \x20     depends_on: cache, when: cache.miss }}\n\
         \x20 - {{ name: store, service: redis, command: [SET, 'q:{{{{q_hash}}}}', '{{{{search.text}}}}'],\n\
         \x20     depends_on: search, when: search.ok, target: '127.0.0.1:{p}' }}\n\
         \x20 - {{ name: seen, service: http, method: POST, path: '/seen/{{{{first}}}}',\n\
         \x20     body: {{ cached: '{{{{cache.text}}}}' }}, target: 'http://{a}',\n\
         \x20     depends_on: cache, when: cache.hit }}\n\
         data: {{ q: {{ values: [one] }} }}\n",
        a = srv.addr,
        p = redis.1
    );
    let s = Scenario::from_yaml(&text, Path::new("."), &|_| None).unwrap();
    let schedule = s.plan.schedule().unwrap();
    let out = run(&s, &schedule, &options(None), Arc::new(Live::default())).unwrap();
    assert!(
        out.outcomes.iter().all(|o| o.failure.is_none()),
        "{:?}",
        out.outcomes
    );
    let of = |k: usize| -> Vec<&Outcome> { out.outcomes.iter().filter(|o| o.step == k).collect() };
    assert_eq!(of(0).len(), 20);
    let hits = of(0).iter().filter(|o| o.cache == Some(Cache::Hit)).count();
    let misses = of(0)
        .iter()
        .filter(|o| o.cache == Some(Cache::Miss))
        .count();
    assert_eq!(hits + misses, 20);
    // The first journey misses (nothing is stored yet); at 20/s with
    // answers in ms, the later ones find what it stored.
    assert!(misses >= 1 && hits >= 10, "hits {hits}, misses {misses}");
    assert_eq!(of(1).len(), misses);
    assert_eq!(of(2).len(), misses);
    assert_eq!(of(3).len(), hits);
    // Redis measured on the run's clock: sent, then its reply.
    for o in of(0) {
        assert!(o.sent_us >= o.intended_us && o.end_us >= o.sent_us);
        assert_eq!(o.first_byte_us, Some(o.end_us));
        assert_eq!(o.status, None);
    }
    // What `store` SET is the search's body, read back from Redis.
    let hash = "7692c3ad3540bb80"; // SHA-256 of `one`, 16 hex digits.
    assert_eq!(
        get(redis.1, &format!("q:{hash}")).as_deref(),
        Some(r#"{"ids": ["doc-7", "doc-9"]}"#)
    );
    let paths = srv.paths();
    // The setup's extract reached the journeys and the teardown.
    assert_eq!(paths.iter().filter(|p| *p == "/seen/doc-7").count(), hits);
    assert_eq!(paths.first().map(String::as_str), Some("/json"));
    assert_eq!(paths.last().map(String::as_str), Some("/drop/doc-7"));
    assert_eq!(out.setup.len(), 1);
    assert!(out.setup[0].ok && out.teardown[0].ok);
    // Setup and teardown stay out of the summary; hits and misses count.
    let r = report(&s, &out);
    assert_eq!(r.summary.requests, out.outcomes.len() as u64);
    assert_eq!(r.steps[0].service, "redis");
    assert_eq!(r.steps[1].service, "vector");
    assert_eq!(
        (
            r.steps[0].summary.cache_hits,
            r.steps[0].summary.cache_misses
        ),
        (hits as u64, misses as u64)
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["steps"][0]["cache_hits"], hits as u64);
    assert_eq!(json["setup"][0]["name"], "make");
    assert_eq!(json["teardown"][0]["ok"], true);
}

#[test]
fn a_failing_setup_sends_no_load_and_the_teardown_still_runs() {
    let Some(redis) = redis() else {
        // CI installs redis-server (scripts/install-deps.sh): a skip there hides a bug.
        assert!(
            std::env::var_os("CI").is_none(),
            "redis-server is missing in CI"
        );
        eprintln!("skipped: redis-server is not installed");
        return;
    };
    let srv = server(u64::MAX, Duration::ZERO);
    let text = format!(
        "scenario: bad-setup\n\
         target: {{ base_url: 'http://{a}' }}\n\
         setup: [ {{ name: ping, service: redis, command: [PING], target: '127.0.0.1:{p}' }},\n\
         \x20        {{ name: make, service: http, path: /fail }} ]\n\
         teardown: [ {{ name: drop, service: http, path: /drop }} ]\n\
         workload: {{ arrival: {{ kind: constant, rate: 20 }}, duration: 1s }}\n\
         steps: [ {{ name: ping, service: http, path: /ping }} ]\n",
        a = srv.addr,
        p = redis.1
    );
    let s = Scenario::from_yaml(&text, Path::new("."), &|_| None).unwrap();
    let schedule = s.plan.schedule().unwrap();
    let err = run(&s, &schedule, &options(None), Arc::new(Live::default())).unwrap_err();
    assert_eq!(
        err.to_string(),
        "setup[1] (`make`) failed (status 500): no load was sent"
    );
    let paths = srv.paths();
    assert_eq!(paths, ["/fail", "/drop"]);
    // A redis error reply is a `status` failure: here, an unknown command.
    let text = text.replace("command: [PING]", "command: [NOPE]");
    let s = Scenario::from_yaml(&text, Path::new("."), &|_| None).unwrap();
    let err = run(&s, &schedule, &options(None), Arc::new(Live::default())).unwrap_err();
    assert_eq!(
        err.to_string(),
        "setup[0] (`ping`) failed (status): no load was sent"
    );
}
