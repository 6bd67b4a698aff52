//! One connection's RESP observation: requests as they are sent, replies as
//! they arrive, paired first in first out, so pipelining keeps its latencies.
//! Anything it cannot follow ends the observation for that connection; the
//! bytes are the caller's and keep flowing regardless.

use std::collections::VecDeque;

use super::command::Command;
use super::reply::ReplyParser;
use super::request::{ClientReply, RequestParser};

/// Requests sent and not yet answered before the session gives up: bounds
/// the memory of a client that pipelines without reading (16 bytes each).
pub(super) const MAX_IN_FLIGHT: usize = 16 * 1024;

/// A request and its reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exchange {
    pub command: Command,
    pub error: bool,
    /// A null reply: for GET, a miss.
    pub null: bool,
    /// Sent inside MULTI: the reply is `+QUEUED`, the command runs at EXEC.
    pub queued: bool,
    /// From the request's last byte sent to the reply's last byte received.
    pub latency_ns: u64,
}

impl Exchange {
    /// For a GET: `Some(true)` on a hit, `Some(false)` on a miss; an error,
    /// or a GET only queued in a transaction, is neither.
    pub fn get_hit(&self) -> Option<bool> {
        (self.command == Command::GET && !self.error && !self.queued).then_some(!self.null)
    }
}

/// Why a connection stopped being observed (the `reason` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// The client sent something that is not a RESP request.
    BadRequest,
    /// The server sent something that is not a RESP reply.
    BadReply,
    /// A reply came with no request waiting for it.
    UnpairedReply,
    /// SUBSCRIBE, MONITOR and the like: replies stop following requests.
    UntrackedCommand,
    /// More than [`MAX_IN_FLIGHT`] requests unanswered.
    TooManyInFlight,
}

impl Fallback {
    pub const ALL: [Fallback; 5] = [
        Fallback::BadRequest,
        Fallback::BadReply,
        Fallback::UnpairedReply,
        Fallback::UntrackedCommand,
        Fallback::TooManyInFlight,
    ];

    pub fn reason(self) -> &'static str {
        match self {
            Fallback::BadRequest => "bad_request",
            Fallback::BadReply => "bad_reply",
            Fallback::UnpairedReply => "unpaired_reply",
            Fallback::UntrackedCommand => "untracked_command",
            Fallback::TooManyInFlight => "too_many_in_flight",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

#[derive(Clone, Copy, Debug)]
struct InFlight {
    command: Command,
    queued: bool,
    sent_ns: u64,
}

/// The observer of one connection.
#[derive(Debug, Default)]
pub struct RespSession {
    requests: RequestParser,
    replies: ReplyParser,
    in_flight: VecDeque<InFlight>,
    /// `CLIENT REPLY OFF` is in force.
    replies_off: bool,
    /// `CLIENT REPLY SKIP`: the next request gets no reply.
    skip_next: bool,
    /// Between MULTI and EXEC or DISCARD: commands are queued, not run.
    in_multi: bool,
    stopped: bool,
}

impl RespSession {
    /// Whether the session still follows the connection.
    pub fn observing(&self) -> bool {
        !self.stopped
    }

    /// Bytes the client sent, now written to the server in full, at `now_ns`.
    /// `Err` once, when the session stops; then it ignores everything.
    pub fn requests_sent(&mut self, bytes: &[u8], now_ns: u64) -> Result<(), Fallback> {
        if self.stopped {
            return Ok(());
        }
        let mut stop = None;
        let Self {
            requests,
            in_flight,
            replies_off,
            skip_next,
            in_multi,
            ..
        } = self;
        let parsed = requests.feed(bytes, &mut |request| {
            if stop.is_some() {
                return;
            }
            if request.command.ends_pairing() {
                stop = Some(Fallback::UntrackedCommand);
                return;
            }
            let answered = match request.client_reply {
                Some(ClientReply::On) => {
                    *replies_off = false;
                    *skip_next = false;
                    true
                }
                Some(ClientReply::Off) => {
                    *replies_off = true;
                    false
                }
                Some(ClientReply::Skip) => {
                    *skip_next = !*replies_off;
                    false
                }
                None if *replies_off => false,
                None => !std::mem::take(skip_next),
            };
            let command = request.command;
            let queued = *in_multi && ![Command::EXEC, Command::DISCARD].contains(&command);
            if command == Command::MULTI {
                *in_multi = true;
            } else if command == Command::EXEC || command == Command::DISCARD {
                *in_multi = false;
            }
            if !answered {
                return;
            }
            if in_flight.len() >= MAX_IN_FLIGHT {
                stop = Some(Fallback::TooManyInFlight);
                return;
            }
            in_flight.push_back(InFlight {
                command,
                queued,
                sent_ns: now_ns,
            });
        });
        let stop = match parsed {
            Err(_) => Some(Fallback::BadRequest),
            Ok(()) => stop,
        };
        self.stop_if(stop)
    }

    /// Bytes the server sent, just read in full at `now_ns`; `done` gets each
    /// exchange they complete. `Err` once, when the session stops.
    pub fn replies_received(
        &mut self,
        bytes: &[u8],
        now_ns: u64,
        done: &mut impl FnMut(Exchange),
    ) -> Result<(), Fallback> {
        if self.stopped {
            return Ok(());
        }
        let mut stop = None;
        let Self {
            replies, in_flight, ..
        } = self;
        let parsed = replies.feed(bytes, &mut |reply| {
            if stop.is_some() || reply.push {
                return;
            }
            match in_flight.pop_front() {
                Some(request) => done(Exchange {
                    command: request.command,
                    error: reply.error,
                    null: reply.null,
                    queued: request.queued,
                    latency_ns: now_ns.saturating_sub(request.sent_ns),
                }),
                None => stop = Some(Fallback::UnpairedReply),
            }
        });
        let stop = match parsed {
            Err(_) => Some(Fallback::BadReply),
            Ok(()) => stop,
        };
        self.stop_if(stop)
    }

    fn stop_if(&mut self, stop: Option<Fallback>) -> Result<(), Fallback> {
        match stop {
            None => Ok(()),
            Some(reason) => {
                self.stopped = true;
                // Nothing will be paired any more: give the memory back now.
                self.in_flight = VecDeque::new();
                Err(reason)
            }
        }
    }
}
