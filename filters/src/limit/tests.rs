#![allow(clippy::unwrap_used, clippy::panic)]

use super::*;

const TOTAL_600: Limits = Limits {
    requests_per_minute: None,
    input_tokens_per_minute: None,
    output_tokens_per_minute: None,
    total_tokens_per_minute: Some(600),
    concurrent_streams: None,
};

fn cost(input: u64, output: u64) -> Cost {
    Cost { input, output }
}

fn limited(d: Decision) -> (LimitKind, u64) {
    match d {
        Decision::Limited {
            kind,
            retry_after_ms,
            ..
        } => (kind, retry_after_ms),
        other => panic!("not limited: {other:?}"),
    }
}

#[test]
fn a_bucket_refills_at_its_limit_per_minute() {
    // 600 tokens a minute is 10 a second: after 500 spent, 1.5 s gives 15 back.
    let mut s = KeyState::new(&TOTAL_600, 0);
    assert!(matches!(
        s.admit(&TOTAL_600, cost(100, 400), 0),
        Decision::Allowed(_)
    ));
    assert_eq!(s.headers(&TOTAL_600).tokens, Some((600, 100, 50_000)));
    // 200 more need 100 beyond the 100 left: 10 s at 10/s.
    assert_eq!(
        limited(s.admit(&TOTAL_600, cost(0, 200), 0)),
        (LimitKind::TotalTokens, 10_000)
    );
    let h = s.headers(&TOTAL_600);
    assert_eq!(h.tokens, Some((600, 100, 50_000)));
    // A refusal takes nothing; 1.5 s later 115 are left.
    assert!(matches!(
        s.admit(&TOTAL_600, cost(0, 0), 1_500),
        Decision::Allowed(_)
    ));
    assert_eq!(s.headers(&TOTAL_600).tokens, Some((600, 115, 48_500)));
    // Never above the limit.
    s.settle(&TOTAL_600, cost(100, 400), cost(100, 400), 1_500);
    s.admit(&TOTAL_600, cost(0, 0), 10 * WINDOW_MS);
    assert_eq!(s.remaining_total(), 600);
}

#[test]
fn every_limit_or_none_is_taken() {
    let limits = Limits {
        requests_per_minute: Some(2),
        input_tokens_per_minute: Some(1_000),
        output_tokens_per_minute: Some(100),
        total_tokens_per_minute: None,
        concurrent_streams: None,
    };
    let mut s = KeyState::new(&limits, 0);
    assert!(matches!(
        s.admit(&limits, cost(10, 50), 0),
        Decision::Allowed(_)
    ));
    // The output budget refuses (10 short at 100 a minute: 6 s); the
    // request and input budgets keep what they had.
    assert_eq!(
        limited(s.admit(&limits, cost(10, 60), 0)),
        (LimitKind::OutputTokens, 6_000)
    );
    let h = s.headers(&limits);
    assert_eq!(h.requests, Some((2, 1, 30_000)));
    assert_eq!(h.tokens, Some((100, 50, 30_000)));
    assert!(matches!(
        s.admit(&limits, cost(10, 50), 0),
        Decision::Allowed(_)
    ));
    // Two requests a minute: the third waits 30 s for one; the output
    // budget (empty) would take 60 s for 100 but this asks for 10: 6 s.
    // The longest wait is the answer.
    assert_eq!(
        limited(s.admit(&limits, cost(10, 10), 0)),
        (LimitKind::Requests, 30_000)
    );
}

#[test]
fn a_cost_above_the_whole_minute_passes_a_full_bucket_and_leaves_a_debt() {
    let mut s = KeyState::new(&TOTAL_600, 0);
    assert!(matches!(
        s.admit(&TOTAL_600, cost(0, 900), 0),
        Decision::Allowed(_)
    ));
    // 300 in debt: 300 / 10 per s = 30 s to zero, 90 s to full.
    assert_eq!(s.headers(&TOTAL_600).tokens, Some((600, 0, 90_000)));
    assert_eq!(
        limited(s.admit(&TOTAL_600, cost(0, 10), 0)),
        (LimitKind::TotalTokens, 31_000)
    );
}

#[test]
fn settling_charges_a_long_answer_and_refunds_a_short_one() {
    let mut s = KeyState::new(&TOTAL_600, 0);
    s.admit(&TOTAL_600, cost(50, 100), 0);
    s.admit(&TOTAL_600, cost(50, 100), 0);
    assert_eq!(s.streams, 2);
    // Reserved 100 output, the answer was 250: 150 more.
    let long = s.settle(&TOTAL_600, cost(50, 100), cost(40, 250), 0);
    assert_eq!(
        long,
        Settled {
            extra: 140,
            refunded: 0
        }
    );
    assert_eq!(s.remaining_total(), 600 - 300 - 140);
    // Reserved 150 in all, the answer was 20 in all: 130 back.
    let short = s.settle(&TOTAL_600, cost(50, 100), cost(10, 10), 0);
    assert_eq!(
        short,
        Settled {
            extra: 0,
            refunded: 130
        }
    );
    assert_eq!(s.remaining_total(), 160 + 130);
    assert_eq!(s.streams, 0);
    // The bucket's level is what the answers cost in all: 290 + 20.
    assert_eq!(600 - s.remaining_total(), 290 + 20);
}

#[test]
fn concurrent_streams_free_their_slot_when_settled() {
    let limits = Limits {
        concurrent_streams: Some(1),
        ..Limits::default()
    };
    let mut s = KeyState::new(&limits, 0);
    assert!(matches!(
        s.admit(&limits, cost(1, 1), 0),
        Decision::Allowed(_)
    ));
    assert_eq!(
        limited(s.admit(&limits, cost(1, 1), 0)),
        (LimitKind::ConcurrentStreams, STREAM_RETRY_MS)
    );
    s.settle(&limits, cost(1, 1), cost(1, 1), 5);
    assert!(matches!(
        s.admit(&limits, cost(1, 1), 5),
        Decision::Allowed(_)
    ));
}

#[test]
fn descriptors_and_keys() {
    assert_eq!(Descriptor::parse("route"), Some(Descriptor::Route));
    assert_eq!(Descriptor::parse("model"), Some(Descriptor::Model));
    assert_eq!(
        Descriptor::parse("header:X-Tenant"),
        Some(Descriptor::Header("x-tenant".into()))
    );
    for bad in ["header:", "header:a b", "tenant", "Model", "header"] {
        assert_eq!(Descriptor::parse(bad), None, "{bad}");
    }
    let ds = [
        Descriptor::Header("x-tenant".into()),
        Descriptor::Model,
        Descriptor::Route,
    ];
    let headers = |name: &str| (name == "x-tenant").then_some(&b"acme"[..]);
    assert_eq!(
        limit_key(&ds, "chat", Some("gpt-4o"), headers),
        "acme\u{1f}gpt-4o\u{1f}chat"
    );
    assert_eq!(limit_key(&ds, "chat", None, |_| None), "\u{1f}\u{1f}chat");
}

#[test]
fn openai_shapes() {
    assert_eq!(format_reset(120), "120ms");
    assert_eq!(format_reset(1_000), "1s");
    assert_eq!(format_reset(1_001), "2s");
    assert_eq!(format_reset(360_000), "6m0s");
    assert_eq!(format_reset(61_500), "1m2s");
    assert_eq!(retry_after_secs(0), 1);
    assert_eq!(retry_after_secs(10_000), 10);
    assert_eq!(retry_after_secs(10_001), 11);
    assert_eq!(estimate_input_tokens(9), 3);
    let body: serde_json::Value =
        serde_json::from_str(&limited_body(LimitKind::TotalTokens, 2_500)).unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    assert_eq!(body["error"]["type"], "tokens");
    assert_eq!(
        body["error"]["message"],
        "Rate limit reached (total_tokens_per_minute). Please try again in 3s."
    );
}
