//! Tests of W3C `traceparent` parsing against the recommendation's examples.
#![allow(clippy::unwrap_used)]

use super::*;

// The examples of the W3C Trace Context recommendation.
const SPEC_SAMPLED: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const SPEC_UNSAMPLED: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
const TRACE_ID: [u8; 16] = [
    0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36,
];
const SPAN_ID: [u8; 8] = [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7];

#[test]
fn parses_the_spec_examples() {
    let sampled = TraceContext::parse(SPEC_SAMPLED.as_bytes()).unwrap();
    assert_eq!(
        sampled,
        TraceContext {
            trace_id: TRACE_ID,
            span_id: SPAN_ID,
            sampled: true
        }
    );
    let unsampled = TraceContext::parse(SPEC_UNSAMPLED.as_bytes()).unwrap();
    assert!(!unsampled.sampled);
    assert_eq!(unsampled.trace_id, TRACE_ID);
}

#[test]
fn round_trips_and_writes_hex() {
    for value in [SPEC_SAMPLED, SPEC_UNSAMPLED] {
        let ctx = TraceContext::parse(value.as_bytes()).unwrap();
        assert_eq!(ctx.to_traceparent(), value);
    }
    let ctx = TraceContext::parse(SPEC_SAMPLED.as_bytes()).unwrap();
    assert_eq!(ctx.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(ctx.span_id_hex(), "00f067aa0ba902b7");
}

#[test]
fn reads_only_the_sampled_bit_of_the_flags() {
    let v = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09";
    assert!(TraceContext::parse(v.as_bytes()).unwrap().sampled);
    let v = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-fe";
    assert!(!TraceContext::parse(v.as_bytes()).unwrap().sampled);
}

#[test]
fn accepts_future_versions_reading_four_fields() {
    let v = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-will-be-like";
    let ctx = TraceContext::parse(v.as_bytes()).unwrap();
    assert_eq!(ctx.trace_id, TRACE_ID);
    assert!(ctx.sampled);
    // Exactly four fields is fine too.
    let v = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    assert!(TraceContext::parse(v.as_bytes()).is_some());
    // A longer future value must continue with a dash.
    let v = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01.x";
    assert_eq!(TraceContext::parse(v.as_bytes()), None);
}

#[test]
fn trims_blanks() {
    let v = format!(" \t{SPEC_SAMPLED} ");
    assert!(TraceContext::parse(v.as_bytes()).is_some());
}

#[test]
fn rejects_invalid_values() {
    let bad = [
        "",
        "00",
        // Version ff is forbidden.
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        // Version 00 must be exactly 55 characters.
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
        // All-zero ids.
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        // Upper-case hex, non-hex, wrong separators, wrong field lengths.
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        "0G-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e47360-0f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
    ];
    for v in bad {
        assert_eq!(TraceContext::parse(v.as_bytes()), None, "{v:?}");
    }
}

#[test]
fn sampling_follows_the_parent_else_the_ratio() {
    let sampled = TraceContext::parse(SPEC_SAMPLED.as_bytes()).unwrap();
    let unsampled = TraceContext::parse(SPEC_UNSAMPLED.as_bytes()).unwrap();
    assert!(sample(Some(&sampled), 0.0, 0.99));
    assert!(!sample(Some(&unsampled), 1.0, 0.0));
    assert!(sample(None, 1.0, 0.999_999));
    assert!(!sample(None, 0.0, 0.0));
    assert!(sample(None, 0.25, 0.2));
    assert!(!sample(None, 0.25, 0.25));
}
