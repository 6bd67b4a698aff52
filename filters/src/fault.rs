//! Fault experiments as the data plane sees them: what an experiment
//! matches, the one action it injects, and the pure decision whether it
//! fires for one request or TCP connection. The caller passes the time the
//! experiment has run, its current number of faulted requests and a random
//! number in; the state itself lives in the control plane.

mod action;
mod header;
mod metrics;
mod pace;

pub use action::{
    ActionName, Direction, Distribution, FaultAction, FaultKind, GrpcAbort, RequestAction,
    StreamAction, Toxic, TruncateMode,
};
pub use header::{
    header_faults, HeaderFault, HEADER_ABORT, HEADER_ABORT_GRPC, HEADER_DELAY, HEADER_TOKEN_DELAY,
};
pub use metrics::FaultMetrics;
pub use pace::{Pacer, Step, CORRUPT_EVENT, CORRUPT_GRPC_MESSAGE};

use std::time::Duration;

use crate::matcher::{HeaderMatch, RequestView};

/// What an experiment's `match` block asks for. Every condition that is set
/// must hold; an empty block matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultMatch {
    pub route: Option<String>,
    pub cluster: Option<String>,
    pub listener: Option<String>,
    pub headers: Vec<HeaderMatch>,
    pub model: Option<String>,
}

/// The stop condition `halt_if`: the route's error rate over `window`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HaltIf {
    /// Percent, 0..=100.
    pub error_rate: f64,
    pub window: Duration,
}

/// One experiment, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct Experiment {
    pub id: String,
    pub matcher: FaultMatch,
    /// Share of matching requests (or TCP connections) faulted, 0..=100.
    pub percent: f64,
    /// How long the experiment may fire after it was added.
    pub ttl: Duration,
    /// At most this many requests faulted at once.
    pub max_active: Option<u32>,
    pub halt_if: Option<HaltIf>,
    pub action: FaultAction,
}

/// What the data plane knows of a request (or connection) when it decides.
/// `request` is `None` on TCP listeners, where no header can match.
pub struct FaultTarget<'a, R: RequestView> {
    pub listener: &'a str,
    pub route: Option<&'a str>,
    pub cluster: Option<&'a str>,
    pub model: Option<&'a str>,
    pub request: Option<&'a R>,
}

/// An experiment's state at the moment of the decision.
#[derive(Clone, Copy, Debug, Default)]
pub struct FaultClock {
    /// Time since the experiment was added.
    pub elapsed: Duration,
    /// Requests it is faulting right now.
    pub active: u32,
    /// Set once `halt_if` tripped or the experiment was removed.
    pub halted: bool,
}

/// Why an experiment did not fire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    Expired,
    Halted,
    NoMatch,
    NotSampled,
    AtMaxActive,
}

impl FaultMatch {
    pub fn matches<R: RequestView>(&self, t: &FaultTarget<'_, R>) -> bool {
        let same = |want: &Option<String>, have: Option<&str>| {
            want.as_deref().is_none_or(|w| have == Some(w))
        };
        if !(same(&self.listener, Some(t.listener))
            && same(&self.route, t.route)
            && same(&self.cluster, t.cluster)
            && same(&self.model, t.model))
        {
            return false;
        }
        match t.request {
            Some(req) => self
                .headers
                .iter()
                .all(|m| req.header(&m.name) == Some(m.value.as_bytes())),
            None => self.headers.is_empty(),
        }
    }
}

impl Experiment {
    /// Whether the experiment fires for this target. Cheap checks come
    /// first (most experiments do not match most requests); the TTL is
    /// checked here, on the data path, before anything fires, so that an
    /// expired experiment never fires whatever the control loop does.
    pub fn decide<R: RequestView>(
        &self,
        target: &FaultTarget<'_, R>,
        clock: FaultClock,
        random: u64,
    ) -> Result<(), Skip> {
        if clock.halted {
            return Err(Skip::Halted);
        }
        if !self.matcher.matches(target) {
            return Err(Skip::NoMatch);
        }
        if clock.elapsed >= self.ttl {
            return Err(Skip::Expired);
        }
        if !sampled(self.percent, random) {
            return Err(Skip::NotSampled);
        }
        if self.max_active.is_some_and(|max| clock.active >= max) {
            return Err(Skip::AtMaxActive);
        }
        Ok(())
    }

    /// Time the experiment may still fire, zero once expired.
    pub fn time_left(&self, elapsed: Duration) -> Duration {
        self.ttl.saturating_sub(elapsed)
    }
}

/// `percent` of the values of `random` say yes, to 1e-6 percent.
pub fn sampled(percent: f64, random: u64) -> bool {
    if percent >= 100.0 {
        return true;
    }
    if percent <= 0.0 {
        return false;
    }
    let scale = 100_000_000u64;
    let threshold = (percent * 1_000_000.0) as u64;
    random % scale < threshold
}

#[cfg(test)]
mod tests;
