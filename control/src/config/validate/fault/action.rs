//! An experiment's `action`: exactly one key, its values parsed, and a kind
//! that fits the listener (toxics only on tcp listeners, L7 and streaming
//! actions only on HTTP).

use std::time::Duration;

use sluice_filters::{Direction, Distribution, FaultAction, FaultKind, Toxic, TruncateMode};

use super::super::super::raw::{
    RawDelay, RawDirection, RawDistribution, RawFaultAction, RawTruncateMode,
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
        errs.push(path, "required (one of delay, abort, reset, close, first_token_delay, token_delay, stall, truncate, drop_usage, drop_done, corrupt, bandwidth, latency, slicer, slow_close, timeout, reset_peer, limit_data)");
        return None;
    };
    let set = set_keys(a);
    if set.len() != 1 {
        let found = if set.is_empty() {
            "none".to_string()
        } else {
            set.join(", ")
        };
        errs.push(
            path,
            format!("exactly one action is required, found {found}"),
        );
        return None;
    }
    let key = set[0];
    let at = format!("{path}.{key}");
    let action = parse(&at, a, on_tcp, errs)?;
    match (action.kind(), on_tcp) {
        (FaultKind::Tcp, false) => errs.push(
            at,
            "acts on tcp connections: set match.listener to a tcp listener",
        ),
        (FaultKind::Request | FaultKind::Stream, true) => {
            errs.push(at, "acts on HTTP requests, not on a tcp listener")
        }
        _ => return Some(action),
    }
    None
}

fn set_keys(a: &RawFaultAction) -> Vec<&'static str> {
    let keys = [
        ("delay", a.delay.is_some()),
        ("abort", a.abort.is_some()),
        ("reset", a.reset.is_some()),
        ("close", a.close.is_some()),
        ("first_token_delay", a.first_token_delay.is_some()),
        ("token_delay", a.token_delay.is_some()),
        ("stall", a.stall.is_some()),
        ("truncate", a.truncate.is_some()),
        ("drop_usage", a.drop_usage.is_some()),
        ("drop_done", a.drop_done.is_some()),
        ("corrupt", a.corrupt.is_some()),
        ("bandwidth", a.bandwidth.is_some()),
        ("latency", a.latency.is_some()),
        ("slicer", a.slicer.is_some()),
        ("slow_close", a.slow_close.is_some()),
        ("timeout", a.timeout.is_some()),
        ("reset_peer", a.reset_peer.is_some()),
        ("limit_data", a.limit_data.is_some()),
    ];
    keys.iter()
        .filter(|(_, set)| *set)
        .map(|(k, _)| *k)
        .collect()
}

fn parse(at: &str, a: &RawFaultAction, on_tcp: bool, errs: &mut Errors) -> Option<FaultAction> {
    let positive = |errs: &mut Errors, field: &str, text: &str| {
        errs.duration(format!("{at}.{field}"), Some(text), Duration::ZERO)
    };
    let no_distribution = |errs: &mut Errors, d: &RawDelay| {
        if d.distribution.is_some() {
            errs.push(format!("{at}.distribution"), "allowed only with delay");
        }
    };
    let no_jitter = |errs: &mut Errors, d: &RawDelay| {
        if d.jitter.is_some() {
            errs.push(format!("{at}.jitter"), "not allowed here");
        }
    };
    if let Some(d) = &a.delay {
        return Some(FaultAction::Delay {
            delay: positive(errs, "delay", &d.delay),
            jitter: zero_or_more(errs, format!("{at}.jitter"), d.jitter.as_deref()),
            distribution: match d.distribution {
                None | Some(RawDistribution::Uniform) => Distribution::Uniform,
                Some(RawDistribution::Normal) => Distribution::Normal,
                Some(RawDistribution::Lognormal) => Distribution::Lognormal,
            },
        });
    }
    if let Some(x) = &a.abort {
        if !(200..=599).contains(&x.status) {
            errs.push(
                format!("{at}.status"),
                format!("{} is not an HTTP status from 200 to 599", x.status),
            );
        }
        return Some(FaultAction::Abort {
            status: x.status,
            body: x.body.clone().unwrap_or_else(|| "fault injected".into()),
        });
    }
    if a.reset.is_some() {
        return Some(FaultAction::Reset);
    }
    if a.close.is_some() {
        return Some(FaultAction::Close);
    }
    if let Some(d) = &a.first_token_delay {
        no_distribution(errs, d);
        no_jitter(errs, d);
        return Some(FaultAction::FirstTokenDelay {
            delay: positive(errs, "delay", &d.delay),
        });
    }
    if let Some(d) = &a.token_delay {
        no_distribution(errs, d);
        return Some(FaultAction::TokenDelay {
            delay: positive(errs, "delay", &d.delay),
            jitter: zero_or_more(errs, format!("{at}.jitter"), d.jitter.as_deref()),
        });
    }
    if let Some(s) = &a.stall {
        return Some(FaultAction::Stall {
            after_chunks: s.after_chunks,
            duration: positive(errs, "duration", &s.duration),
        });
    }
    if let Some(t) = &a.truncate {
        return Some(FaultAction::Truncate {
            after_chunks: t.after_chunks,
            mode: match t.mode {
                RawTruncateMode::Clean => TruncateMode::Clean,
                RawTruncateMode::Abrupt => TruncateMode::Abrupt,
            },
        });
    }
    if a.drop_usage.is_some() {
        return Some(FaultAction::DropUsage);
    }
    if a.drop_done.is_some() {
        return Some(FaultAction::DropDone);
    }
    if let Some(c) = &a.corrupt {
        return Some(FaultAction::Corrupt {
            after_chunks: c.after_chunks,
        });
    }
    if let Some(b) = &a.bandwidth {
        if b.bytes_per_sec == 0 {
            errs.push(format!("{at}.bytes_per_sec"), "must be at least 1");
        }
        if !on_tcp {
            if b.direction.is_some() {
                errs.push(format!("{at}.direction"), "allowed only on a tcp listener");
            }
            return Some(FaultAction::StreamBandwidth {
                bytes_per_sec: b.bytes_per_sec,
            });
        }
        return Some(FaultAction::Tcp(Toxic::Bandwidth {
            bytes_per_sec: b.bytes_per_sec,
            direction: direction(b.direction),
        }));
    }
    toxic(at, a, errs).map(FaultAction::Tcp)
}

fn toxic(at: &str, a: &RawFaultAction, errs: &mut Errors) -> Option<Toxic> {
    if let Some(l) = &a.latency {
        return Some(Toxic::Latency {
            latency: errs.duration(format!("{at}.latency"), Some(&l.latency), Duration::ZERO),
            jitter: zero_or_more(errs, format!("{at}.jitter"), l.jitter.as_deref()),
            direction: direction(l.direction),
        });
    }
    if let Some(s) = &a.slicer {
        if s.average_size == 0 {
            errs.push(format!("{at}.average_size"), "must be at least 1");
        }
        if s.size_variation >= s.average_size.max(1) {
            errs.push(
                format!("{at}.size_variation"),
                format!(
                    "must be less than average_size ({}), found {}",
                    s.average_size, s.size_variation
                ),
            );
        }
        return Some(Toxic::Slicer {
            average_size: s.average_size,
            size_variation: s.size_variation,
            delay: zero_or_more(errs, format!("{at}.delay"), Some(&s.delay)),
            direction: direction(s.direction),
        });
    }
    if let Some(d) = &a.slow_close {
        if d.jitter.is_some() || d.distribution.is_some() {
            errs.push(at.to_string(), "takes only delay");
        }
        return Some(Toxic::SlowClose {
            delay: errs.duration(format!("{at}.delay"), Some(&d.delay), Duration::ZERO),
        });
    }
    if let Some(t) = &a.timeout {
        return Some(Toxic::Timeout {
            timeout: zero_or_more(errs, format!("{at}.timeout"), Some(&t.timeout)),
        });
    }
    if let Some(t) = &a.reset_peer {
        return Some(Toxic::ResetPeer {
            timeout: zero_or_more(errs, format!("{at}.timeout"), Some(&t.timeout)),
        });
    }
    let l = a.limit_data.as_ref()?;
    if l.bytes == 0 {
        errs.push(format!("{at}.bytes"), "must be at least 1");
    }
    Some(Toxic::LimitData {
        bytes: l.bytes,
        direction: direction(l.direction),
    })
}

fn direction(raw: Option<RawDirection>) -> Direction {
    match raw {
        Some(RawDirection::Upstream) => Direction::Upstream,
        None | Some(RawDirection::Downstream) => Direction::Downstream,
    }
}
