//! `listeners[].limits`: sizes within what pingora itself can take, positive
//! timeouts and a connection count of at least 1.

use super::super::raw::RawListenerLimits;
use super::super::typed::ListenerLimits;
use super::errors::Errors;

/// The `http` crate refuses a longer URI before sluice could answer 414.
const MAX_URI: u64 = 64 << 10;
/// pingora refuses a longer head (request line and headers) with a 400.
const MAX_HEADER: u64 = 1 << 20;

pub(super) fn limits(
    at: &str,
    raw: Option<&RawListenerLimits>,
    errs: &mut Errors,
) -> ListenerLimits {
    let mut out = ListenerLimits::default();
    let Some(raw) = raw else { return out };
    let at = format!("{at}.limits");
    if let Some(n) = errs.size_within(
        format!("{at}.max_uri_bytes"),
        raw.max_uri_bytes.as_ref(),
        (1, MAX_URI),
        "1 ..= 64KiB",
    ) {
        out.head.max_uri_bytes = n as usize;
    }
    if let Some(n) = errs.size_within(
        format!("{at}.max_header_bytes"),
        raw.max_header_bytes.as_ref(),
        (1, MAX_HEADER - MAX_URI),
        "1 ..= 960KiB",
    ) {
        out.head.max_header_bytes = n as usize;
    }
    out.header_timeout = errs.duration(
        format!("{at}.header_timeout"),
        raw.header_timeout.as_deref(),
        out.header_timeout,
    );
    out.idle_timeout = errs.duration(
        format!("{at}.idle_timeout"),
        raw.idle_timeout.as_deref(),
        out.idle_timeout,
    );
    match raw.max_connections {
        Some(0) => errs.push(format!("{at}.max_connections"), "must be at least 1"),
        Some(n) => out.max_connections = usize::try_from(n).unwrap_or(usize::MAX),
        None => {}
    }
    out
}
