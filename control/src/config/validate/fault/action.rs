//! An experiment's `action`: exactly one key, its values parsed, and a kind
//! that fits the listener (toxics only on tcp listeners, L7 and streaming
//! actions only on HTTP).

use std::time::Duration;

use sluice_filters::{
    grpc_status_http, join_names, ActionName, Direction, Distribution, FaultAction, FaultKind,
    GrpcAbort, RequestAction, StreamAction, Toxic, TruncateMode, GRPC_MAX_STATUS,
};

use super::super::super::raw::{
    RawAbort, RawActionBody, RawDelay, RawDirection, RawDistribution, RawEmpty, RawFaultAction,
    RawTruncateMode,
};
use super::super::Errors;
use super::zero_or_more;

pub(super) fn action(
    at: &str,
    raw: Option<&RawFaultAction>,
    on_tcp: bool,
    errs: &mut Errors,
) -> Option<FaultAction> {
    let path = format!("{at}.action");
    let Some(a) = raw else {
        errs.push(path, format!("required (one of {})", ActionName::names()));
        return None;
    };
    let [body] = a.0.as_slice() else {
        let found = match a.0.is_empty() {
            true => "none".to_string(),
            false => join_names(a.0.iter().map(|b| b.name().as_str())),
        };
        errs.push(
            path,
            format!("exactly one action is required, found {found}"),
        );
        return None;
    };
    let at = format!("{path}.{}", body.name());
    let action = parse(&at, body, on_tcp, errs);
    match (action.kind(), on_tcp) {
        (FaultKind::Tcp, false) => errs.push(
            at,
            "acts on tcp connections: set match.listener to a tcp listener",
        ),
        (FaultKind::Request | FaultKind::Stream, true) => {
            errs.push(at, "acts on HTTP requests, not on a tcp listener")
        }
        (FaultKind::Tcp, true) | (FaultKind::Request | FaultKind::Stream, false) => {
            return Some(action)
        }
    }
    None
}

fn parse(at: &str, body: &RawActionBody, on_tcp: bool, errs: &mut Errors) -> FaultAction {
    let positive = |errs: &mut Errors, field: &str, text: &str| {
        errs.duration(format!("{at}.{field}"), Some(text), Duration::ZERO)
    };
    let may_be_zero = |errs: &mut Errors, field: &str, text: Option<&str>| {
        zero_or_more(errs, format!("{at}.{field}"), text)
    };
    let only_delay = |errs: &mut Errors, d: &RawDelay, jitter: bool| {
        if d.distribution.is_some() {
            errs.push(format!("{at}.distribution"), "allowed only with delay");
        }
        if !jitter && d.jitter.is_some() {
            errs.push(format!("{at}.jitter"), "not allowed here");
        }
    };
    let at_least_one = |errs: &mut Errors, field: &str, n: u64| {
        if n == 0 {
            errs.push(format!("{at}.{field}"), "must be at least 1");
        }
    };
    match body {
        RawActionBody::Delay(d) => FaultAction::Request(RequestAction::Delay {
            delay: positive(errs, "delay", &d.delay),
            jitter: may_be_zero(errs, "jitter", d.jitter.as_deref()),
            distribution: match d.distribution {
                None | Some(RawDistribution::Uniform) => Distribution::Uniform,
                Some(RawDistribution::Normal) => Distribution::Normal,
                Some(RawDistribution::Lognormal) => Distribution::Lognormal,
            },
        }),
        RawActionBody::Abort(x) => FaultAction::Request(abort(at, x, errs)),
        RawActionBody::Reset(RawEmpty {}) => FaultAction::Request(RequestAction::Reset),
        RawActionBody::Close(RawEmpty {}) => FaultAction::Request(RequestAction::Close),
        RawActionBody::FirstTokenDelay(d) => {
            only_delay(errs, d, false);
            FaultAction::Stream(StreamAction::FirstTokenDelay {
                delay: positive(errs, "delay", &d.delay),
            })
        }
        RawActionBody::TokenDelay(d) => {
            only_delay(errs, d, true);
            FaultAction::Stream(StreamAction::TokenDelay {
                delay: positive(errs, "delay", &d.delay),
                jitter: may_be_zero(errs, "jitter", d.jitter.as_deref()),
            })
        }
        RawActionBody::Stall(s) => FaultAction::Stream(StreamAction::Stall {
            after_chunks: s.after_chunks,
            duration: positive(errs, "duration", &s.duration),
        }),
        RawActionBody::Truncate(t) => FaultAction::Stream(StreamAction::Truncate {
            after_chunks: t.after_chunks,
            mode: match t.mode {
                RawTruncateMode::Clean => TruncateMode::Clean,
                RawTruncateMode::Abrupt => TruncateMode::Abrupt,
            },
        }),
        RawActionBody::DropUsage(RawEmpty {}) => FaultAction::Stream(StreamAction::DropUsage),
        RawActionBody::DropDone(RawEmpty {}) => FaultAction::Stream(StreamAction::DropDone),
        RawActionBody::Corrupt(c) => FaultAction::Stream(StreamAction::Corrupt {
            after_chunks: c.after_chunks,
        }),
        RawActionBody::Bandwidth(b) if !on_tcp => {
            at_least_one(errs, "bytes_per_sec", b.bytes_per_sec);
            if b.direction.is_some() {
                errs.push(format!("{at}.direction"), "allowed only on a tcp listener");
            }
            FaultAction::Stream(StreamAction::Bandwidth {
                bytes_per_sec: b.bytes_per_sec,
            })
        }
        RawActionBody::Bandwidth(b) => {
            at_least_one(errs, "bytes_per_sec", b.bytes_per_sec);
            FaultAction::Tcp(Toxic::Bandwidth {
                bytes_per_sec: b.bytes_per_sec,
                direction: direction(b.direction),
            })
        }
        RawActionBody::Latency(l) => FaultAction::Tcp(Toxic::Latency {
            latency: positive(errs, "latency", &l.latency),
            jitter: may_be_zero(errs, "jitter", l.jitter.as_deref()),
            direction: direction(l.direction),
        }),
        RawActionBody::Slicer(s) => {
            at_least_one(errs, "average_size", s.average_size as u64);
            if s.size_variation >= s.average_size.max(1) {
                errs.push(
                    format!("{at}.size_variation"),
                    format!(
                        "must be less than average_size ({}), found {}",
                        s.average_size, s.size_variation
                    ),
                );
            }
            FaultAction::Tcp(Toxic::Slicer {
                average_size: s.average_size,
                size_variation: s.size_variation,
                delay: may_be_zero(errs, "delay", Some(&s.delay)),
                direction: direction(s.direction),
            })
        }
        RawActionBody::SlowClose(d) => {
            if d.jitter.is_some() || d.distribution.is_some() {
                errs.push(at.to_string(), "takes only delay");
            }
            FaultAction::Tcp(Toxic::SlowClose {
                delay: positive(errs, "delay", &d.delay),
            })
        }
        RawActionBody::Timeout(t) => FaultAction::Tcp(Toxic::Timeout {
            timeout: may_be_zero(errs, "timeout", Some(&t.timeout)),
        }),
        RawActionBody::ResetPeer(t) => FaultAction::Tcp(Toxic::ResetPeer {
            timeout: may_be_zero(errs, "timeout", Some(&t.timeout)),
        }),
        RawActionBody::LimitData(l) => {
            at_least_one(errs, "bytes", l.bytes);
            FaultAction::Tcp(Toxic::LimitData {
                bytes: l.bytes,
                direction: direction(l.direction),
            })
        }
    }
}

fn direction(raw: Option<RawDirection>) -> Direction {
    match raw {
        Some(RawDirection::Upstream) => Direction::Upstream,
        None | Some(RawDirection::Downstream) => Direction::Downstream,
    }
}

/// An abort answers HTTP `status`, gRPC calls `grpc_status` when set; a
/// request of the other kind gets the one given (a gRPC code as the HTTP
/// status it stands for, `grpc_status_http`).
fn abort(at: &str, x: &RawAbort, errs: &mut Errors) -> RequestAction {
    if let Some(status) = x.status.filter(|s| !(200..=599).contains(s)) {
        errs.push(
            format!("{at}.status"),
            format!("{status} is not an HTTP status from 200 to 599"),
        );
    }
    if let Some(code) = x.grpc_status.filter(|&c| c > GRPC_MAX_STATUS) {
        errs.push(
            format!("{at}.grpc_status"),
            format!("{code} is not a gRPC status code from 0 to {GRPC_MAX_STATUS}"),
        );
    }
    if x.status.is_none() && x.grpc_status.is_none() {
        errs.push(at, "needs `status` (HTTP), `grpc_status` (gRPC) or both");
    }
    if x.message.is_some() && x.grpc_status.is_none() {
        errs.push(
            format!("{at}.message"),
            "is the gRPC message: allowed only with grpc_status (use body for HTTP)",
        );
    }
    let grpc = x.grpc_status.map(|status| GrpcAbort {
        status,
        message: x.message.clone().unwrap_or_else(|| "fault injected".into()),
    });
    RequestAction::Abort {
        status: x
            .status
            .or(x.grpc_status.map(grpc_status_http))
            .unwrap_or(500),
        body: x.body.clone().unwrap_or_else(|| "fault injected".into()),
        grpc,
    }
}
