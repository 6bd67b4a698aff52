use std::time::Duration;

use super::*;
use crate::meter::EventKind;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Plans `n` content events arriving every `gap` ms (the first at 100 ms),
/// then a usage event and `[DONE]`; returns every step.
fn plan(action: StreamAction, n: u64, gap: u64) -> Vec<Step> {
    let mut p = Pacer::new(action);
    let mut steps = p.on_event(EventKind::Other, 40, ms(90), 0.5);
    for i in 0..n {
        steps.extend(p.on_event(EventKind::Content, 40, ms(100 + i * gap), 0.5));
    }
    let end = 100 + n * gap;
    steps.extend(p.on_event(EventKind::Usage, 60, ms(end), 0.5));
    steps.extend(p.on_event(EventKind::Done, 14, ms(end), 0.5));
    steps
}

fn forwards(steps: &[Step]) -> Vec<u64> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Forward(at) => Some(at.as_millis() as u64),
            _ => None,
        })
        .collect()
}

#[test]
fn token_delay_spaces_content_evenly_by_gap_plus_delay() {
    let steps = plan(
        StreamAction::TokenDelay {
            delay: ms(50),
            jitter: ms(0),
        },
        5,
        10,
    );
    // Role chunk and first token as they came; then every 60 ms.
    assert_eq!(forwards(&steps), [90, 100, 160, 220, 280, 340, 340, 340]);
}

#[test]
fn first_token_delay_shifts_the_rest_too() {
    let steps = plan(StreamAction::FirstTokenDelay { delay: ms(300) }, 3, 10);
    assert_eq!(forwards(&steps), [90, 400, 410, 420, 430, 430]);
}

#[test]
fn stall_holds_once_after_its_chunks() {
    let steps = plan(
        StreamAction::Stall {
            after_chunks: 2,
            duration: ms(500),
        },
        4,
        10,
    );
    assert_eq!(forwards(&steps), [90, 100, 110, 620, 630, 640, 640]);
}

#[test]
fn truncate_ends_after_its_chunks_and_sends_nothing_more() {
    let steps = plan(
        StreamAction::Truncate {
            after_chunks: 2,
            mode: TruncateMode::Abrupt,
        },
        4,
        10,
    );
    assert_eq!(
        steps,
        [
            Step::Forward(ms(90)),
            Step::Forward(ms(100)),
            Step::Forward(ms(110)),
            Step::End(ms(120), TruncateMode::Abrupt),
        ]
    );
}

#[test]
fn drops_and_corruption() {
    assert_eq!(forwards(&plan(StreamAction::DropUsage, 2, 10)).len(), 4);
    assert_eq!(forwards(&plan(StreamAction::DropDone, 2, 10)).len(), 4);
    let steps = plan(StreamAction::Corrupt { after_chunks: 1 }, 3, 10);
    assert_eq!(steps[2], Step::Corrupt(ms(110)));
    assert_eq!(
        steps
            .iter()
            .filter(|s| matches!(s, Step::Corrupt(_)))
            .count(),
        1
    );
}

#[test]
fn bandwidth_spaces_events_by_their_size() {
    // 40-byte events at 400 B/s: 100 ms each.
    let steps = plan(StreamAction::Bandwidth { bytes_per_sec: 400 }, 3, 10);
    assert_eq!(forwards(&steps), [90, 190, 290, 390, 490, 640]);
}

#[test]
fn token_delay_jitter_stays_within_its_bounds() {
    let mut p = Pacer::new(StreamAction::TokenDelay {
        delay: ms(50),
        jitter: ms(10),
    });
    p.on_event(EventKind::Content, 10, ms(0), 0.5);
    let low = p.on_event(EventKind::Content, 10, ms(10), 0.0);
    assert_eq!(low, [Step::Forward(ms(50))]);
    let high = p.on_event(EventKind::Content, 10, ms(20), 1.0);
    assert_eq!(high, [Step::Forward(ms(120))]);
}
