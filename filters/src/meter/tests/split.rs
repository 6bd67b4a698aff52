//! The same summary whatever the chunk boundaries: every fixture cut at
//! every byte into two chunks, and into many random pieces, with `\n` and
//! `\r\n` line ends.

use proptest::prelude::*;

use super::*;

/// `bytes` with `\n` line ends, or every `\n` as `\r\n`.
fn variant(bytes: &[u8], crlf: bool) -> Vec<u8> {
    if !crlf {
        return bytes.to_vec();
    }
    let mut out = Vec::with_capacity(bytes.len() * 2);
    for b in bytes {
        if *b == b'\n' {
            out.push(b'\r');
        }
        out.push(*b);
    }
    out
}

/// Feeds `bytes` cut at `cuts` (sorted), piece `j` at `j + 1` ms, and
/// checks the result against the event-by-event reading. Timing is exact:
/// an event counts at the piece holding its terminator's last byte, or at
/// the finish when it has none.
fn check_split(dialect: Dialect, bytes: &[u8], cuts: &[usize]) {
    let (reference, per_event) = by_event(bytes, dialect);
    let ends = event_ends(bytes, dialect);
    let finish_at = ms(10_000);
    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(bytes.len());
    let piece_of = |offset: usize| bounds.windows(2).position(|w| offset < w[1]).unwrap_or(0);

    let mut expected_counts = vec![0u32; bounds.len() - 1];
    let mut content_at = Vec::new();
    for ((end, terminated), count) in ends.iter().zip(&per_event) {
        let at = if *terminated {
            let piece = piece_of(end - 1);
            expected_counts[piece] += count;
            ms(piece as u64 + 1)
        } else {
            finish_at
        };
        if *count > 0 {
            content_at.push(at);
        }
    }

    let mut meter = TokenMeter::new(dialect);
    let counts: Vec<u32> = bounds
        .windows(2)
        .enumerate()
        .map(|(j, w)| meter.feed(&bytes[w[0]..w[1]], ms(j as u64 + 1)))
        .collect();
    let summary = meter.finish(finish_at);

    assert_eq!(counts, expected_counts, "cuts {cuts:?}");
    let expected = MeterSummary {
        first_content_at: content_at.first().copied(),
        last_content_at: content_at.last().copied(),
        ..reference
    };
    assert_eq!(summary, expected, "cuts {cuts:?}");
}

#[test]
fn every_fixture_cut_at_every_byte() {
    for f in FIXTURES {
        for crlf in [false, true] {
            let bytes = variant(f.bytes, crlf);
            for cut in 0..=bytes.len() {
                check_split(f.dialect, &bytes, &[cut]);
            }
        }
    }
}

#[test]
fn crlf_reads_like_lf() {
    for f in FIXTURES {
        let (lf, _) = by_event(f.bytes, f.dialect);
        let (crlf, _) = by_event(&variant(f.bytes, true), f.dialect);
        assert_eq!(lf, crlf, "{}", f.name);
    }
}

#[test]
fn one_byte_at_a_time() {
    for f in FIXTURES {
        for crlf in [false, true] {
            let bytes = variant(f.bytes, crlf);
            let cuts: Vec<usize> = (1..bytes.len()).collect();
            check_split(f.dialect, &bytes, &cuts);
        }
    }
}

proptest! {
    #[test]
    fn any_cuts_give_the_same_summary(
        which in 0..FIXTURES.len(),
        crlf in any::<bool>(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
    ) {
        let f = &FIXTURES[which];
        let bytes = variant(f.bytes, crlf);
        let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        cuts.sort_unstable();
        check_split(f.dialect, &bytes, &cuts);
    }
}
