//! The pusher against loopback peers: one that answers (the request it
//! got), one that refuses, one that never answers. The load's side never
//! waits on them: each push is bounded, and a failure only counted.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::path::Path;
use std::sync::mpsc;

use sluice_filters::LoadRunState;
use sluice_workload::Scenario;

use super::*;

fn scenario() -> Scenario {
    let text = "scenario: chat\n\
        target: { base_url: 'http://127.0.0.1:9' }\n\
        workload: { arrival: { kind: constant, rate: 10 }, duration: 2s, seed: 1 }\n\
        steps: [ { name: answer, service: llm, model: m, prompt: hi } ]\n";
    Scenario::from_yaml(text, Path::new("."), &|_| None).unwrap()
}

fn meta() -> RunMeta {
    RunMeta {
        run_id: "load-00000000000000cd".into(),
        scenario: "chat".into(),
        shard: "0/1".into(),
        mode: "open",
        started_at: "2026-12-03T08:00:00Z".into(),
    }
}

/// Runs the pusher with the run already settled: the one, final push.
fn push_once(url: &str, token: &str) -> Pushes {
    let s = scenario();
    let schedule = s.plan.schedule().unwrap();
    let shape = Shape::new(&s, &schedule.arrivals, schedule.span_us, false);
    let live = Live::default();
    let (tx, rx) = mpsc::channel();
    tx.send(Settled {
        thresholds: Vec::new(),
        passed: true,
        interrupted: true,
    })
    .unwrap();
    let token = AdminToken {
        token: token.into(),
    };
    let to = ReportTo { url, token: &token };
    push_until_settled(to, &shape, &live, &meta(), &rx, &Stderr::new(false, 0))
}

/// One HTTP/1.1 request read off `listener`: its head and body; answered
/// with `status`.
fn answer_once(
    listener: TcpListener,
    status: &'static str,
) -> std::thread::JoinHandle<(String, String)> {
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut head = String::new();
        loop {
            let mut l = String::new();
            reader.read_line(&mut l).unwrap();
            if l == "\r\n" || l.is_empty() {
                break;
            }
            head.push_str(&l);
        }
        let length: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length: ")
                    .map(str::to_owned)
            })
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let answer =
            format!("HTTP/1.1 {status}\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}");
        (&stream).write_all(answer.as_bytes()).unwrap();
        (head, String::from_utf8(body).unwrap())
    })
}

#[test]
fn the_final_push_posts_the_load_run_with_the_token() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let seen = answer_once(listener, "201 Created");
    let pushes = push_once(&url(&base).unwrap(), "s3cret");
    assert_eq!(pushes, Pushes { made: 1, failed: 0 });
    let (head, body) = seen.join().unwrap();
    assert!(
        head.starts_with("POST /v1/load-runs HTTP/1.1\r\n"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("authorization: bearer s3cret\r\n"),
        "{head}"
    );
    let run: LoadRun = serde_json::from_str(&body).unwrap();
    assert_eq!(run.run_id, "load-00000000000000cd");
    assert_eq!(run.state, LoadRunState::Interrupted);
    assert_eq!((run.stages, run.duration_s), (1, 2.0));
    assert_eq!(run.check(), Ok(()));
}

#[test]
fn a_refused_a_silent_and_a_rejecting_api_are_counted_not_fatal() {
    // Refused: a port just bound and let go.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let refused = push_once(&format!("http://127.0.0.1:{port}"), "t");
    assert_eq!(refused, Pushes { made: 1, failed: 1 });
    // Accepts and never answers: the push gives up after its timeout.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let pushes = push_once(&format!("http://{}", silent.local_addr().unwrap()), "t");
    assert_eq!(pushes, Pushes { made: 1, failed: 1 });
    drop(silent);
    // A wrong token: the API's 401.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = answer_once(listener, "401 Unauthorized");
    assert_eq!(
        push_once(&format!("http://{addr}"), "wrong"),
        Pushes { made: 1, failed: 1 }
    );
    seen.join().unwrap();
}

#[test]
fn report_to_takes_an_http_base_url() {
    assert_eq!(
        url("http://127.0.0.1:9901/").unwrap(),
        "http://127.0.0.1:9901"
    );
    assert_eq!(
        url("http://127.0.0.1:9901/sluice").unwrap(),
        "http://127.0.0.1:9901/sluice"
    );
    let https = "`https://a:1` is not an http:// URL (the control API is plain http; https is not supported)";
    assert_eq!(url("https://a:1").unwrap_err(), https);
    let bare = "`127.0.0.1:9901` is not an http:// URL (the control API is plain http; https is not supported)";
    assert_eq!(url("127.0.0.1:9901").unwrap_err(), bare);
    assert!(url("http://a b")
        .unwrap_err()
        .starts_with("`http://a b` is not a URL: "));
}
