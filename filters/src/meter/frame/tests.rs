//! The framer against streams built event by event, so the expected events
//! are known from the construction: any cut of the bytes into chunks gives
//! exactly them, for `\n`, `\r\n` and mixed line ends.

use proptest::prelude::*;

use super::*;

/// Feeds `bytes` cut at `cuts` (any order, any values up to the length).
fn frame(framing: Framing, bytes: &[u8], cuts: &[usize]) -> Vec<OwnedEvent> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| *c.min(&bytes.len())).collect();
    cuts.sort_unstable();
    let mut framer = Framer::new(framing);
    let mut out = Vec::new();
    let mut start = 0;
    for cut in cuts.into_iter().chain([bytes.len()]) {
        framer.feed(&bytes[start..cut], |e| out.push(OwnedEvent::of(e)));
        start = cut;
    }
    assert!(framer.finish(|e| out.push(OwnedEvent::of(e))).is_none());
    out
}

/// One SSE line: its field and value (`None` for a comment line), and its end.
#[derive(Clone, Debug)]
struct Line {
    field: Option<&'static str>,
    value: String,
    crlf: bool,
}

fn line() -> impl Strategy<Value = Line> {
    let field = prop_oneof![
        4 => Just(Some("data")),
        1 => Just(Some("event")),
        1 => Just(Some("id")),
        1 => Just(None),
    ];
    (field, "[a-z{}\":, ]{0,12}", any::<bool>()).prop_map(|(field, value, crlf)| Line {
        field,
        value,
        crlf,
    })
}

/// An SSE event: one to four lines, then a blank line with its own end.
fn sse_event() -> impl Strategy<Value = (Vec<Line>, bool)> {
    (prop::collection::vec(line(), 1..5), any::<bool>())
}

fn eol(crlf: bool) -> &'static [u8] {
    if crlf {
        b"\r\n"
    } else {
        b"\n"
    }
}

/// The bytes of `events` and the events a reader must see, built apart from
/// the framer.
fn sse_stream(events: &[(Vec<Line>, bool)]) -> (Vec<u8>, Vec<OwnedEvent>) {
    let mut bytes = Vec::new();
    let mut expected = Vec::new();
    for (lines, blank_crlf) in events {
        let start = bytes.len();
        let mut name = Vec::new();
        let mut data: Option<Vec<u8>> = None;
        for l in lines {
            match l.field {
                Some(field) => bytes.extend_from_slice(format!("{field}: {}", l.value).as_bytes()),
                None => bytes.extend_from_slice(format!(":{}", l.value).as_bytes()),
            }
            bytes.extend_from_slice(eol(l.crlf));
            match l.field {
                Some("event") => name = l.value.clone().into_bytes(),
                Some("data") => match data.as_mut() {
                    Some(d) => {
                        d.push(b'\n');
                        d.extend_from_slice(l.value.as_bytes());
                    }
                    None => data = Some(l.value.clone().into_bytes()),
                },
                _ => {}
            }
        }
        bytes.extend_from_slice(eol(*blank_crlf));
        expected.push(OwnedEvent {
            raw: bytes[start..].to_vec(),
            name,
            data,
        });
    }
    (bytes, expected)
}

/// NDJSON: each line's text (empty for a blank line) and its end.
fn ndjson_stream(lines: &[(String, bool)]) -> (Vec<u8>, Vec<OwnedEvent>) {
    let mut bytes = Vec::new();
    let mut expected = Vec::new();
    for (text, crlf) in lines {
        let start = bytes.len();
        bytes.extend_from_slice(text.as_bytes());
        bytes.extend_from_slice(eol(*crlf));
        expected.push(OwnedEvent {
            raw: bytes[start..].to_vec(),
            name: Vec::new(),
            data: Some(text.clone().into_bytes()).filter(|t| !t.is_empty()),
        });
    }
    (bytes, expected)
}

proptest! {
    #[test]
    fn any_split_of_an_sse_stream_gives_its_events(
        events in prop::collection::vec(sse_event(), 0..12),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..30),
    ) {
        let (bytes, expected) = sse_stream(&events);
        let cuts: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        prop_assert_eq!(frame(Framing::Sse, &bytes, &cuts), expected);
    }

    #[test]
    fn any_split_of_an_ndjson_stream_gives_its_lines(
        lines in prop::collection::vec(("[a-z{}\":, ]{0,12}", any::<bool>()), 0..12),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..30),
    ) {
        let lines: Vec<(String, bool)> = lines
            .into_iter()
            .map(|(t, crlf)| (t.trim().to_owned(), crlf))
            .collect();
        let (bytes, expected) = ndjson_stream(&lines);
        let cuts: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        prop_assert_eq!(frame(Framing::Lines, &bytes, &cuts), expected);
    }
}

#[test]
fn every_single_cut_of_mixed_line_ends() {
    let bytes = b"event: a\r\ndata: 1\n\r\n: ping\n\ndata: 2\r\ndata: 3\r\n\r\ndata: 4\n\n";
    let whole = frame(Framing::Sse, bytes, &[]);
    let data: Vec<Option<&[u8]>> = whole.iter().map(|e| e.data.as_deref()).collect();
    assert_eq!(
        data,
        [Some(&b"1"[..]), None, Some(b"2\n3"), Some(b"4")],
        "{whole:?}"
    );
    assert_eq!(whole[0].name, b"a");
    let rebuilt: Vec<u8> = whole.iter().flat_map(|e| e.raw.clone()).collect();
    assert_eq!(rebuilt, bytes);
    for a in 0..=bytes.len() {
        for b in a..=bytes.len() {
            assert_eq!(frame(Framing::Sse, bytes, &[a, b]), whole, "cuts {a} {b}");
        }
    }
}

#[test]
fn a_crlf_blank_line_ends_the_event_before_a_later_lf_one() {
    let bytes = b"data: a\r\n\r\ndata: b\n\n";
    let events = frame(Framing::Sse, bytes, &[]);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0].raw, b"data: a\r\n\r\n");
    assert_eq!(events[0].data.as_deref(), Some(&b"a"[..]));
    assert_eq!(events[1].raw, b"data: b\n\n");
}

#[test]
fn a_last_event_without_its_blank_line_is_read_at_the_end() {
    let events = frame(Framing::Sse, b"data: a\n\ndata: b\n", &[12]);
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].raw, b"data: b\n");
    assert_eq!(events[1].data.as_deref(), Some(&b"b"[..]));
}

#[test]
fn an_oversized_event_is_dropped_whole_and_counted() {
    let mut big = b"data: ".to_vec();
    big.resize(MAX_EVENT + 10, b'x');
    big.extend_from_slice(b"\r\n\r\ndata: after\n\n");
    let mut framer = Framer::new(Framing::Sse);
    let mut out = Vec::new();
    for chunk in big.chunks(4096) {
        framer.feed(chunk, |e| out.push(OwnedEvent::of(e)));
    }
    framer.finish(|e| out.push(OwnedEvent::of(e)));
    assert_eq!(framer.oversized(), 1);
    assert_eq!(out.len(), 1, "only the event after it");
    assert_eq!(out[0].raw, b"data: after\n\n");
}
