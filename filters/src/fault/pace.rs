//! When each event of a faulted stream goes to the client. The proxy cuts
//! the upstream's answer with the meter's `Framer` as it comes, classifies
//! each event with the token meter (`EventKind`, every dialect), asks the
//! pacer when (and whether) to send it, and sends it on its own timer: the
//! gaps the client sees are the pacer's, not bursts of whatever pingora had
//! queued.

use std::time::Duration;

use super::action::{StreamAction, TruncateMode};
use crate::meter::EventKind;

/// One thing to send, and when (time since the stream started).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Forward(Duration),
    /// A malformed event, sent before the forwarded one.
    Corrupt(Duration),
    /// End the answer here; nothing after it is sent.
    End(Duration, TruncateMode),
}

/// The malformed event `corrupt` inserts: a data line whose JSON is cut.
pub const CORRUPT_EVENT: &[u8] = b"data: {\"choices\":[{\"delta\":{\"content\":\"\n\n";

/// What `corrupt` inserts in a gRPC stream: a one-byte message flagged
/// compressed when no `grpc-encoding` was agreed, which a gRPC client
/// refuses (INTERNAL) whatever its message type.
pub const CORRUPT_GRPC_MESSAGE: &[u8] = &[1, 0, 0, 0, 1, 0xff];

#[derive(Clone, Debug)]
pub struct Pacer {
    action: StreamAction,
    last_emit: Duration,
    last_arrival: Option<Duration>,
    last_len: usize,
    content_seen: u32,
    /// Time added to every later event (first_token_delay, stall).
    shift: Duration,
    corrupted: bool,
    ended: bool,
}

impl Pacer {
    pub fn new(action: StreamAction) -> Self {
        Pacer {
            action,
            last_emit: Duration::ZERO,
            last_arrival: None,
            last_len: 0,
            content_seen: 0,
            shift: Duration::ZERO,
            corrupted: false,
            ended: false,
        }
    }

    /// Plans one event that arrived at `arrival`, `len` bytes long.
    /// `random` (0..1) draws a token delay's jitter. An empty answer drops
    /// the event.
    pub fn on_event(
        &mut self,
        kind: EventKind,
        len: usize,
        arrival: Duration,
        random: f64,
    ) -> Vec<Step> {
        if self.ended {
            return Vec::new();
        }
        let content = kind == EventKind::Content;
        let mut at = (arrival + self.shift).max(self.last_emit);
        let mut steps = Vec::with_capacity(2);
        // Each action acts at its moment only; before and after it the
        // event goes as it came.
        match self.action {
            StreamAction::FirstTokenDelay { delay } => {
                if content && self.content_seen == 0 {
                    self.shift = delay;
                    at = (arrival + delay).max(self.last_emit);
                }
            }
            StreamAction::TokenDelay { delay, jitter } => {
                if content && self.content_seen > 0 {
                    let gap = self
                        .last_arrival
                        .map_or(Duration::ZERO, |last| arrival.saturating_sub(last));
                    let spread = jitter.as_secs_f64() * (2.0 * random - 1.0);
                    let extra = (delay.as_secs_f64() + spread).max(0.0);
                    at = at.max(self.last_emit + gap + Duration::from_secs_f64(extra));
                }
            }
            StreamAction::Stall {
                after_chunks,
                duration,
            } => {
                if content && self.content_seen == after_chunks && self.shift.is_zero() {
                    self.shift = duration;
                    at = (arrival + duration).max(self.last_emit + duration);
                }
            }
            StreamAction::Truncate { after_chunks, mode } => {
                if self.content_seen >= after_chunks {
                    self.ended = true;
                    return vec![Step::End(at, mode)];
                }
            }
            StreamAction::DropUsage => {
                if kind == EventKind::Usage {
                    return Vec::new();
                }
            }
            StreamAction::DropDone => {
                if kind == EventKind::Done {
                    return Vec::new();
                }
            }
            StreamAction::Corrupt { after_chunks } => {
                if content && !self.corrupted && self.content_seen == after_chunks {
                    self.corrupted = true;
                    steps.push(Step::Corrupt(at));
                }
            }
            StreamAction::Bandwidth { bytes_per_sec } => {
                if self.last_len > 0 {
                    let send_time = self.last_len as f64 / bytes_per_sec.max(1) as f64;
                    at = at.max(self.last_emit + Duration::from_secs_f64(send_time));
                }
            }
        }
        steps.push(Step::Forward(at));
        self.last_emit = at;
        self.last_len = len;
        if content {
            self.content_seen += 1;
            self.last_arrival = Some(arrival);
        }
        steps
    }

    /// Content events planned so far.
    pub fn content_seen(&self) -> u32 {
        self.content_seen
    }
}

#[cfg(test)]
mod tests;
