use std::time::Duration;

use super::*;
use crate::matcher::RequestParts;

/// A chat request with `headers`.
fn chat_request<'a>(headers: &'a [(&'a str, &'a str)]) -> RequestParts<'a> {
    RequestParts::new("/v1/chat/completions", headers)
}

fn experiment(matcher: FaultMatch) -> Experiment {
    Experiment {
        id: "e1".into(),
        matcher,
        percent: 100.0,
        ttl: Duration::from_secs(10),
        max_active: None,
        halt_if: None,
        action: FaultAction::Request(RequestAction::Reset),
    }
}

fn target<'a>(req: Option<&'a RequestParts<'a>>) -> FaultTarget<'a, RequestParts<'a>> {
    FaultTarget {
        listener: "public",
        route: Some("chat"),
        cluster: Some("llm"),
        model: Some("gpt"),
        request: req,
    }
}

fn clock(elapsed_ms: u64) -> FaultClock {
    FaultClock {
        elapsed: Duration::from_millis(elapsed_ms),
        active: 0,
        halted: false,
    }
}

#[test]
fn an_empty_match_fires_on_everything_until_the_ttl() {
    let e = experiment(FaultMatch::default());
    let req = chat_request(&[]);
    assert_eq!(e.decide(&target(Some(&req)), clock(0), 0), Ok(()));
    assert_eq!(e.decide(&target(None), clock(9_999), 7), Ok(()));
    assert_eq!(
        e.decide(&target(Some(&req)), clock(10_000), 0),
        Err(Skip::Expired)
    );
    assert_eq!(e.time_left(Duration::from_secs(4)), Duration::from_secs(6));
    assert_eq!(e.time_left(Duration::from_secs(40)), Duration::ZERO);
}

#[test]
fn every_match_condition_must_hold() {
    let m = FaultMatch {
        route: Some("chat".into()),
        cluster: Some("llm".into()),
        listener: Some("public".into()),
        headers: vec![HeaderMatch {
            name: "x-tenant".into(),
            value: "a".into(),
        }],
        model: Some("gpt".into()),
    };
    let e = experiment(m.clone());
    let yes = chat_request(&[("x-tenant", "a")]);
    let no = chat_request(&[("x-tenant", "b")]);
    assert_eq!(e.decide(&target(Some(&yes)), clock(0), 0), Ok(()));
    assert_eq!(
        e.decide(&target(Some(&no)), clock(0), 0),
        Err(Skip::NoMatch)
    );
    // A TCP connection has no headers to match.
    assert_eq!(e.decide(&target(None), clock(0), 0), Err(Skip::NoMatch));
    for change in 0..4 {
        let mut t = target(Some(&yes));
        match change {
            0 => t.route = Some("other"),
            1 => t.cluster = None,
            2 => t.listener = "cache",
            _ => t.model = Some("llama"),
        }
        assert_eq!(e.decide(&t, clock(0), 0), Err(Skip::NoMatch), "{change}");
    }
}

#[test]
fn halted_and_full_experiments_do_not_fire() {
    let mut e = experiment(FaultMatch::default());
    e.max_active = Some(2);
    let t = target(None);
    let mut c = clock(0);
    c.active = 1;
    assert_eq!(e.decide(&t, c, 0), Ok(()));
    c.active = 2;
    assert_eq!(e.decide(&t, c, 0), Err(Skip::AtMaxActive));
    c.active = 0;
    c.halted = true;
    assert_eq!(e.decide(&t, c, 0), Err(Skip::Halted));
}

#[test]
fn percent_samples_its_share_of_random_numbers() {
    assert!(!sampled(0.0, 0));
    assert!(sampled(100.0, u64::MAX));
    let hits = (0..100_000u64)
        .filter(|i| sampled(25.0, crate::mix64(*i)))
        .count();
    assert!((24_000..26_000).contains(&hits), "{hits}");
    let mut e = experiment(FaultMatch::default());
    e.percent = 50.0;
    let fired = (0..10_000u64)
        .filter(|i| e.decide(&target(None), clock(0), crate::mix64(*i)).is_ok())
        .count();
    assert!((4_700..5_300).contains(&fired), "{fired}");
}

#[test]
fn delays_are_drawn_around_the_asked_value_and_never_negative() {
    let d = Duration::from_millis(100);
    let j = Duration::from_millis(20);
    let u = Distribution::Uniform;
    assert_eq!(u.draw(d, j, 0.0, 0.0), Duration::from_millis(80));
    assert_eq!(u.draw(d, j, 0.5, 0.0), d);
    assert_eq!(
        Distribution::Normal.draw(d, Duration::from_secs(10), 0.999, 0.5),
        Duration::ZERO
    );
    let mut normal = Vec::new();
    let mut lognormal = Vec::new();
    for i in 0..2_000u64 {
        let u1 = (crate::mix64(i) % 1_000_000) as f64 / 1e6;
        let u2 = (crate::mix64(i + 7_777) % 1_000_000) as f64 / 1e6;
        normal.push(Distribution::Normal.draw(d, j, u1, u2));
        lognormal.push(Distribution::Lognormal.draw(d, j, u1, u2));
    }
    for mut draws in [normal, lognormal] {
        draws.sort();
        let median = draws[draws.len() / 2].as_secs_f64();
        assert!((0.09..0.11).contains(&median), "{median}");
        assert!(draws[0] < Duration::from_millis(80));
        assert!(draws[draws.len() - 1] > Duration::from_millis(120));
    }
}

#[test]
fn actions_say_their_kind_and_name() {
    assert_eq!(
        FaultAction::Request(RequestAction::Reset).kind(),
        FaultKind::Request
    );
    assert_eq!(
        FaultAction::Stream(StreamAction::DropDone).kind(),
        FaultKind::Stream
    );
    let toxic = FaultAction::Tcp(Toxic::ResetPeer {
        timeout: Duration::ZERO,
    });
    assert_eq!(toxic.kind(), FaultKind::Tcp);
    assert_eq!(toxic.name(), "reset_peer");
    assert_eq!(
        FaultAction::Stream(StreamAction::Bandwidth { bytes_per_sec: 1 }).action_name(),
        ActionName::Bandwidth
    );
}

#[test]
fn every_action_name_round_trips_and_unknown_ones_list_the_table() {
    assert_eq!(ActionName::ALL.len(), 18);
    for &name in ActionName::ALL {
        assert_eq!(ActionName::parse(name.as_str()), Ok(name));
    }
    assert_eq!(
        ActionName::parse("explode").map_err(|e| e.to_string()),
        Err(
            "unknown action `explode` (expected one of delay, abort, reset, close, \
             first_token_delay, token_delay, stall, truncate, drop_usage, drop_done, corrupt, \
             bandwidth, latency, slicer, slow_close, timeout, reset_peer, limit_data)"
                .to_string()
        )
    );
}

#[test]
fn fault_headers_are_read_and_bad_values_ignored() {
    let req = chat_request(&[
        (HEADER_DELAY, "200ms"),
        (HEADER_ABORT, "503"),
        (HEADER_ABORT_GRPC, "14"),
        (HEADER_TOKEN_DELAY, "0.03s"),
    ]);
    assert_eq!(
        header_faults(&req),
        HeaderFault {
            delay: Some(Duration::from_millis(200)),
            abort: Some(503),
            abort_grpc: Some(14),
            token_delay: Some(Duration::from_millis(30)),
        }
    );
    let bad = chat_request(&[
        (HEADER_DELAY, "soon"),
        (HEADER_ABORT, "99"),
        (HEADER_ABORT_GRPC, "17"),
        (HEADER_TOKEN_DELAY, "2h"),
    ]);
    assert!(header_faults(&bad).is_empty());
    assert_eq!(
        header_faults(&chat_request(&[(HEADER_DELAY, "15")])).delay,
        Some(Duration::from_millis(15))
    );
    assert!(header_faults(&chat_request(&[])).is_empty());
}
