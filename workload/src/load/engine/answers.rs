//! The measured requests as they end, handed to a reader while the run
//! goes on: the capacity search computes its signals (the P99 slope per
//! token, token throughput, cost) live from them with the same functions
//! as at the stage's end. Off unless a reader asks for it, so a plain
//! `sluice load` keeps nothing twice.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;

use crate::load::client::Outcome;

/// A measured request that ended: what the live signals read of it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Answer {
    pub step: usize,
    /// µs since the schedule's start.
    pub end_us: u64,
    pub ok: bool,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// The response time, end − intended.
    pub e2el_us: u64,
}

impl Answer {
    pub fn of(o: &Outcome) -> Answer {
        Answer {
            step: o.step,
            end_us: o.end_us,
            ok: o.failure.is_none(),
            input_tokens: o.input_tokens,
            output_tokens: o.output_tokens,
            e2el_us: o.e2el_us(),
        }
    }
}

/// Many writers (the journeys), one reader. Sending never waits (std's
/// channel is lock-free on that side); the lock is the reader's alone.
#[derive(Debug)]
pub struct AnswerTap {
    tx: Sender<Answer>,
    rx: Mutex<Receiver<Answer>>,
}

impl Default for AnswerTap {
    fn default() -> AnswerTap {
        let (tx, rx) = channel();
        AnswerTap {
            tx,
            rx: Mutex::new(rx),
        }
    }
}

impl AnswerTap {
    pub(crate) fn push(&self, answer: Answer) {
        // The receiver lives as long as the tap.
        let _ = self.tx.send(answer);
    }

    /// Moves what ended since the last call onto `into`.
    pub fn drain(&self, into: &mut Vec<Answer>) {
        let Ok(rx) = self.rx.lock() else { return };
        into.extend(rx.try_iter());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn what_is_pushed_is_drained_once_in_order() {
        let tap = AnswerTap::default();
        let mut seen = Vec::new();
        tap.drain(&mut seen);
        assert!(seen.is_empty());
        for end_us in [3, 1, 2] {
            tap.push(Answer {
                end_us,
                ..Answer::default()
            });
        }
        tap.drain(&mut seen);
        tap.drain(&mut seen);
        assert_eq!(seen.iter().map(|a| a.end_us).collect::<Vec<_>>(), [3, 1, 2]);
    }

    #[test]
    fn an_answer_keeps_the_response_time_from_the_intended_start() {
        let a = Answer::of(&Outcome {
            step: 2,
            intended_us: 1_000,
            sent_us: 4_000,
            end_us: 51_000,
            output_tokens: Some(7),
            ..Outcome::default()
        });
        assert_eq!(
            a,
            Answer {
                step: 2,
                end_us: 51_000,
                ok: true,
                input_tokens: None,
                output_tokens: Some(7),
                e2el_us: 50_000,
            }
        );
    }
}
