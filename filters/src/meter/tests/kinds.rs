//! What each event of each dialect's fixture carries, as stream faults see it:
//! cut by the one framer, classified by the meter's readers.

use super::*;

fn kinds(name: &str) -> Vec<EventKind> {
    let f = fixture(name);
    let mut framer = Framer::new(f.dialect.framing());
    let mut meter = TokenMeter::new(f.dialect);
    let mut out = Vec::new();
    framer.feed(f.bytes, |e| out.push(meter.read_event(e, ms(1))));
    framer.finish(|e| out.push(meter.read_event(e, ms(2))));
    out
}

use EventKind::{Content as C, Done as D, Other as O, Usage as U};

#[test]
fn every_dialect_names_its_content_usage_and_end() {
    let cases: &[(&str, &[EventKind])] = &[
        ("openai_chat.sse", &[O, C, C, C, C, O, U, D]),
        ("openai_completions.sse", &[C, C, C, O, D]),
        // The role chunk carries usage but is a chunk with a choice.
        ("vllm_bundled.sse", &[O, C, C, C, U, D]),
        ("llamacpp_timings.sse", &[O, C, C, C, O, D]),
        // The last event's token is special: it only ends the stream.
        ("tgi_generate_stream.sse", &[C, C, C, D]),
        ("ollama_chat.ndjson", &[C, C, C, D]),
        ("ollama_generate.ndjson", &[C, C, C, D]),
        ("anthropic_messages.sse", &[O, O, O, C, C, C, O, U, D]),
    ];
    for (name, expected) in cases {
        assert_eq!(kinds(name), *expected, "{name}");
    }
}

#[test]
fn read_event_meters_like_feed() {
    for f in FIXTURES {
        let mut framer = Framer::new(f.dialect.framing());
        let mut by_event = TokenMeter::new(f.dialect);
        framer.feed(f.bytes, |e| {
            by_event.read_event(e, ms(1));
        });
        framer.finish(|e| {
            by_event.read_event(e, ms(1));
        });
        let mut fed = TokenMeter::new(f.dialect);
        fed.feed(f.bytes, ms(1));
        assert_eq!(by_event.finish(ms(1)), fed.finish(ms(1)), "{}", f.name);
    }
}

#[test]
fn comments_and_malformed_events_are_other() {
    let mut meter = TokenMeter::new(Dialect::OpenAi);
    let mut framer = Framer::new(Framing::Sse);
    let mut out = Vec::new();
    framer.feed(
        b": keep-alive\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"\n\n",
        |e| {
            out.push(meter.read_event(e, ms(1)));
        },
    );
    assert_eq!(out, [O, O]);
    assert_eq!(meter.finish(ms(2)).malformed_events, 1);
}
