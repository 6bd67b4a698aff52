//! gRPC answers: each length-prefixed message is a content event at the time
//! of the chunk that brought its last byte.

use super::*;

fn message(payload: &[u8]) -> Vec<u8> {
    let mut m = vec![0];
    m.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    m.extend_from_slice(payload);
    m
}

#[test]
fn detected_from_the_content_type() {
    let grpc = |ct: &str| Dialect::detect("/pkg.Svc/Generate", Some(ct.as_bytes()));
    assert_eq!(grpc("application/grpc"), Dialect::Grpc);
    assert_eq!(grpc("application/grpc+proto"), Dialect::Grpc);
    assert_eq!(grpc("application/grpc-web"), Dialect::Unknown);
}

#[test]
fn messages_at_known_instants() {
    let mut meter = TokenMeter::new(Dialect::Grpc);
    let (m0, m1, m2) = (message(b"tok-0"), message(b"tok-1"), message(b""));
    // The first message's prefix comes alone, at 10 ms: nothing ends yet.
    assert_eq!(meter.feed(&m0[..3], ms(10)), 0);
    assert_eq!(meter.feed(&m0[3..], ms(40)), 1);
    // The second message and the empty third end in one chunk at 90 ms;
    // the fourth's prefix is split across the next two.
    let mut both = m1.clone();
    both.extend_from_slice(&m2);
    assert_eq!(meter.feed(&both, ms(90)), 2);
    let m3 = message(b"tok-3");
    assert_eq!(meter.feed(&m3[..2], ms(100)), 0);
    assert_eq!(meter.feed(&m3[2..], ms(150)), 1);
    let s = meter.finish(ms(160));
    assert_eq!(s.dialect, Dialect::Grpc);
    assert_eq!(s.first_content_at, Some(ms(40)));
    assert_eq!(s.last_content_at, Some(ms(150)));
    assert_eq!(s.content_events, 4);
    assert_eq!(s.output_tokens, Some(4));
    assert!(s.output_tokens_estimated);
    assert_eq!(s.input_tokens, None);
    assert!(s.clean_end);
}

#[test]
fn a_body_cut_inside_a_message_is_not_a_clean_end() {
    let mut meter = TokenMeter::new(Dialect::Grpc);
    let m = message(b"partial");
    assert_eq!(meter.feed(&m[..m.len() - 1], ms(5)), 0);
    let s = meter.finish(ms(9));
    assert_eq!(s.content_events, 0);
    assert_eq!(s.first_content_at, None);
    assert!(!s.clean_end);
}

#[test]
fn any_split_gives_the_same_timing_counts() {
    let mut body = Vec::new();
    for p in [&b"a"[..], b"", b"three"] {
        body.extend_from_slice(&message(p));
    }
    for cut in 0..=body.len() {
        let mut meter = TokenMeter::new(Dialect::Grpc);
        let first = meter.feed(&body[..cut], ms(1));
        let second = meter.feed(&body[cut..], ms(2));
        assert_eq!(first + second, 3, "cut at {cut}");
        let s = meter.finish(ms(3));
        assert_eq!(s.content_events, 3);
        assert!(s.clean_end);
    }
}
