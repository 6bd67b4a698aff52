//! The event framer and the token meter, every dialect: the same events and
//! the same summary whatever the chunk boundaries, events that add up to the
//! body byte for byte, and timings and counts that agree with each other.

use std::time::Duration;

use super::{ensure, Framed, Verdict};
use crate::meter::{Dialect, Framer, MeterSummary, OwnedEvent, TokenMeter};

const DIALECTS: [Dialect; 6] = [
    Dialect::OpenAi,
    Dialect::Anthropic,
    Dialect::Tgi,
    Dialect::Ollama,
    Dialect::Json,
    Dialect::Unknown,
];

/// The selector picks the dialect (`selector % 6`, in the order of
/// `DIALECTS`: OpenAI, Anthropic, TGI, Ollama, JSON, unknown).
pub fn meter(data: &[u8]) -> Verdict {
    let input = Framed::read(data);
    let dialect = DIALECTS[usize::from(input.selector) % DIALECTS.len()];
    let pieces = input.pieces();
    framer(dialect, input.body, &pieces)?;
    token_meter(dialect, input.body, &pieces)
}

/// Every event `framer` cuts from `pieces`, those that end the body
/// included, and what `finish` returned.
fn cut(dialect: Dialect, pieces: &[&[u8]]) -> (Vec<OwnedEvent>, Option<Vec<u8>>, u32) {
    let mut framer = Framer::new(dialect.framing());
    let mut events = Vec::new();
    for piece in pieces {
        framer.feed(piece, |e| events.push(OwnedEvent::of(e)));
    }
    let whole = framer
        .finish(|e| events.push(OwnedEvent::of(e)))
        .map(<[u8]>::to_vec);
    (events, whole, framer.oversized())
}

fn framer(dialect: Dialect, body: &[u8], pieces: &[&[u8]]) -> Verdict {
    let reference = cut(dialect, &[body]);
    let split = cut(dialect, pieces);
    ensure(split == reference, || {
        format!("{dialect:?}: events cut at {pieces:?} differ from the whole body's: {split:?} vs {reference:?}")
    })?;
    let (events, whole, oversized) = reference;
    if oversized > 0 {
        // Dropped events are the one case where the bytes do not add up.
        return Ok(());
    }
    let joined: Vec<u8> = events.iter().flat_map(|e| e.raw.iter().copied()).collect();
    match dialect.framing() {
        crate::Framing::Sse | crate::Framing::Lines => ensure(joined == body, || {
            format!("{dialect:?}: the events' raw bytes are not the body: {joined:?}")
        })?,
        crate::Framing::Whole => {
            ensure(events.is_empty() && whole.as_deref() == Some(body), || {
                format!("{dialect:?}: a whole body came back as {events:?} / {whole:?}")
            })?
        }
        crate::Framing::Off => ensure(events.is_empty() && whole.is_none(), || {
            format!("{dialect:?}: framing off cut {events:?}")
        })?,
    }
    for event in &events {
        if let Some(data) = &event.data {
            // Data is read from the event's own lines: never longer than them.
            ensure(data.len() <= event.raw.len(), || {
                format!("{dialect:?}: data longer than its event: {event:?}")
            })?;
        }
    }
    Ok(())
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// When the body is done: after every piece's time.
const FINISH: Duration = Duration::from_secs(1000);

fn token_meter(dialect: Dialect, body: &[u8], pieces: &[&[u8]]) -> Verdict {
    let mut whole_meter = TokenMeter::new(dialect);
    let whole_count = whole_meter.feed(body, ms(1));
    let whole = whole_meter.finish(FINISH);
    // A second finish, and a chunk after it, change nothing.
    ensure(whole_meter.feed(b"data: {}\n\n", ms(2)) == 0, || {
        "a chunk after finish counted".to_owned()
    })?;
    ensure(whole_meter.finish(ms(3)) == whole, || {
        "a second finish changed the summary".to_owned()
    })?;
    consistent(&whole, &[whole_count], &[ms(1)])?;

    let mut meter = TokenMeter::new(dialect);
    let times: Vec<Duration> = (1..=pieces.len() as u64).map(ms).collect();
    let counts: Vec<u32> = pieces
        .iter()
        .zip(&times)
        .map(|(piece, at)| meter.feed(piece, *at))
        .collect();
    let split = meter.finish(FINISH);
    consistent(&split, &counts, &times)?;
    let sum: u32 = counts.iter().sum();
    ensure(sum == whole_count, || {
        format!("{dialect:?}: pieces {pieces:?} completed {counts:?} content events, the whole body {whole_count}")
    })?;
    // The same summary but for when things happened.
    let untimed = |s: &MeterSummary| MeterSummary {
        first_content_at: None,
        last_content_at: None,
        ..s.clone()
    };
    ensure(untimed(&split) == untimed(&whole), || {
        format!("{dialect:?}: cut at {pieces:?}: {split:?}, whole: {whole:?}")
    })?;
    by_event(dialect, body, &whole)
}

/// What a summary says agrees with what each feed returned (`counts`, the
/// content events completed in the chunk fed at `times`).
fn consistent(s: &MeterSummary, counts: &[u32], times: &[Duration]) -> Verdict {
    let fed: u32 = counts.iter().sum();
    ensure(s.content_events >= fed, || {
        format!(
            "{} content events in the summary, {fed} returned by feed",
            s.content_events
        )
    })?;
    ensure(
        s.first_content_at.is_some() == (s.content_events > 0)
            && s.last_content_at.is_some() == (s.content_events > 0),
        || format!("content moments without content, or content without them: {s:?}"),
    )?;
    if let (Some(first), Some(last)) = (s.first_content_at, s.last_content_at) {
        ensure(first <= last, || {
            format!("TTFT after the last content: {s:?}")
        })?;
        let expected_first = counts
            .iter()
            .zip(times)
            .find(|(c, _)| **c > 0)
            .map_or(FINISH, |(_, at)| *at);
        ensure(first == expected_first, || {
            format!("TTFT {first:?}, but the first chunk with content came at {expected_first:?}")
        })?;
        // Content completed only by the end of the body is timed at the end.
        let expected_last = if s.content_events > fed {
            FINISH
        } else {
            counts
                .iter()
                .zip(times)
                .rev()
                .find(|(c, _)| **c > 0)
                .map_or(FINISH, |(_, at)| *at)
        };
        ensure(last == expected_last, || {
            format!("last content at {last:?}, expected {expected_last:?}")
        })?;
    }
    if s.output_tokens_estimated {
        ensure(s.output_tokens == Some(u64::from(s.content_events)), || {
            format!("an estimate that is not the content count: {s:?}")
        })?;
    }
    Ok(())
}

/// A stream fault cuts events with its own framer and hands each one to the
/// meter: the meter must read them as it reads the chunks.
fn by_event(dialect: Dialect, body: &[u8], whole: &MeterSummary) -> Verdict {
    if !matches!(
        dialect.framing(),
        crate::Framing::Sse | crate::Framing::Lines
    ) {
        return Ok(());
    }
    let mut framer = Framer::new(dialect.framing());
    let mut meter = TokenMeter::new(dialect);
    framer.feed(body, |event| {
        meter.read_event(event, ms(1));
    });
    framer.finish(|event| {
        meter.read_event(event, FINISH);
    });
    let mut read = meter.finish(FINISH);
    read.malformed_events = read.malformed_events.saturating_add(framer.oversized());
    let untimed = |s: &MeterSummary| MeterSummary {
        first_content_at: None,
        last_content_at: None,
        ..s.clone()
    };
    ensure(untimed(&read) == untimed(whole), || {
        format!("{dialect:?}: read event by event {read:?}, fed whole {whole:?}")
    })
}
