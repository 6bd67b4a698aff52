//! Arrivals at the ends of the range, found by the `trace` fuzzer: each
//! format writes what its reader reads back to the same µs, and a second
//! conversion writes the same text.

use super::*;

fn one_line(arrival_us: u64) -> String {
    jsonl(&[TraceLine {
        v: TRACE_VERSION,
        request_id: "r".into(),
        arrival_us,
        input_tokens: Some(3),
        output_tokens: Some(2),
        ..TraceLine::default()
    }])
}

/// BurstGPT's decimal seconds were read through an `f64`: past 2^53 µs
/// (285 years) the µs changed on every trip.
#[test]
fn burstgpt_seconds_read_back_to_the_microsecond() {
    for arrival_us in [31_935_686_404_314_579, u64::MAX, 9_007_199_254_740_993] {
        let burst = convert_text("a.jsonl", &one_line(arrival_us), Format::BurstGpt).unwrap();
        let back = read("b.csv", &burst);
        assert_eq!(back[0].arrival_us, arrival_us, "{burst}");
    }
    // Beyond six decimals the 7th rounds, as the `f64` reading did.
    let text = format!("{}\n1.2345675,,,1,1,2,API log\n", burstgpt::HEADER);
    assert_eq!(read("c.csv", &text)[0].arrival_us, 1_234_568);
    let exponent = format!("{}\n1e3,,,1,1,2,API log\n", burstgpt::HEADER);
    assert_eq!(read("d.csv", &exponent)[0].arrival_us, 1_000_000_000);
}

/// Mooncake rounds to the ms: `arrival_us + 500` overflowed at the top of the
/// range (a panic with overflow checks, timestamp 0 without), and whole ms
/// past 2^53 were read through an `f64`.
#[test]
fn mooncake_ms_at_the_top_of_the_range() {
    let mooncake = convert_text("a.jsonl", &one_line(u64::MAX), Format::Mooncake).unwrap();
    assert!(
        mooncake.starts_with(r#"{"timestamp":18446744073709551,"#),
        "{mooncake}"
    );
    let back = read("m.jsonl", &mooncake);
    assert_eq!(back[0].arrival_us, 18_446_744_073_709_551_000);
    let again = convert_text("n.jsonl", &jsonl(&back), Format::Mooncake).unwrap();
    assert_eq!(again, mooncake);
    let exact = read(
        "e.jsonl",
        r#"{"timestamp":9007199254740993,"input_length":1,"output_length":1}"#,
    );
    assert_eq!(exact[0].arrival_us, 9_007_199_254_740_993_000);
    let negative = reader(
        "f.jsonl",
        r#"{"timestamp":-1,"input_length":1,"output_length":1}"#,
        None,
    )
    .unwrap()
    .next()
    .unwrap()
    .unwrap_err();
    assert_eq!(negative.message, "timestamp: -1 is not a time (ms >= 0)");
}

/// Azure's TIMESTAMP has four-digit years: an arrival past 9999 (µs since
/// the epoch, when the line has no wall clock) was written as `248437-12-19
/// ...`, which the reader refuses. Now the row is refused when written.
#[test]
fn azure_refuses_to_write_a_year_it_cannot_read() {
    let err = convert_text(
        "a.jsonl",
        &one_line(7_777_777_777_777_777_777),
        Format::Azure,
    )
    .unwrap_err();
    assert_eq!(
        err.message,
        "arrival: 248437-12-19T03:09:37.777777Z is outside the years 0000 to 9999 that Azure's TIMESTAMP can hold"
    );
    // The last µs of 9999 is written, and reads back.
    let last = one_line(253_402_300_799_999_999);
    let azure = convert_text("b.jsonl", &last, Format::Azure).unwrap();
    assert!(azure.contains("9999-12-31 23:59:59.9999990,3,2"), "{azure}");
    assert_eq!(read("c.csv", &azure).len(), 1);
}

/// BurstGPT writes input + output tokens as its Total tokens: two counts
/// whose sum passes 2^64 overflowed (a panic with overflow checks; found
/// by the `trace` fuzzer after 7.1M runs). Now the row is refused when
/// written, as a year Azure cannot hold is.
#[test]
fn burstgpt_refuses_a_total_it_cannot_hold() {
    let line = jsonl(&[TraceLine {
        v: TRACE_VERSION,
        request_id: "r".into(),
        arrival_us: 1,
        input_tokens: Some(374),
        output_tokens: Some(u64::MAX),
        ..TraceLine::default()
    }]);
    let err = convert_text("a.jsonl", &line, Format::BurstGpt).unwrap_err();
    assert_eq!(
        err.message,
        "input_tokens + output_tokens: 374 + 18446744073709551615 is more than BurstGPT's \
         Total tokens can hold"
    );
    // The largest total that fits is written.
    let fits = jsonl(&[TraceLine {
        v: TRACE_VERSION,
        request_id: "r".into(),
        arrival_us: 1,
        input_tokens: Some(1),
        output_tokens: Some(u64::MAX - 1),
        ..TraceLine::default()
    }]);
    let burst = convert_text("b.jsonl", &fits, Format::BurstGpt).unwrap();
    assert!(burst.contains(",18446744073709551615,"), "{burst}");
}
