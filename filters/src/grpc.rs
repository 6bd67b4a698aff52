//! gRPC over HTTP/2, as the proxy sees it: which requests are gRPC, their
//! `grpc-timeout`, their method, the `grpc-message` text of an error the
//! proxy writes itself, the HTTP status a gRPC code stands for, and sets of
//! codes (a rollout gate's failures), and where the messages of a body end
//! ([`GrpcFramer`]). Pure: callers pass header values and body bytes.

mod messages;

use std::time::Duration;

pub use messages::{GrpcCutter, GrpcFramer};

/// Whether a request's `content-type` makes it a gRPC call
/// (`application/grpc`, `application/grpc+proto`, `application/grpc;...`).
pub fn is_grpc(content_type: Option<&[u8]>) -> bool {
    let Some(ct) = content_type else { return false };
    let prefix = b"application/grpc";
    ct.len() >= prefix.len()
        && ct[..prefix.len()].eq_ignore_ascii_case(prefix)
        && matches!(ct.get(prefix.len()), None | Some(b'+' | b';'))
}

/// A `grpc-timeout` value (`TimeoutValue TimeoutUnit`: at most 8 digits and
/// one of `H M S m u n`), or `None` when it is not one.
pub fn parse_grpc_timeout(value: &[u8]) -> Option<Duration> {
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// `(service, method)` of a gRPC path `/package.Service/Method`.
pub fn grpc_method(path: &str) -> Option<(&str, &str)> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    (!service.is_empty() && !method.is_empty() && !method.contains('/'))
        .then_some((service, method))
}

/// `text` as a `grpc-message` value: percent-encoded outside printable
/// ASCII and `%`, as the gRPC spec asks.
pub fn grpc_message(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The highest gRPC status code (16, UNAUTHENTICATED).
pub const GRPC_MAX_STATUS: u32 = 16;

/// The HTTP status that gRPC code `code` stands for where an HTTP answer
/// is written instead (an injected `abort` on a request that is not a gRPC
/// call): the table of `google.rpc.Code`, as grpc-gateway and Google's
/// APIs apply it. A code past 16 is UNKNOWN's 500.
pub fn grpc_status_http(code: u32) -> u16 {
    match code {
        0 => 200,
        1 => 499,
        3 | 9 | 11 => 400,
        4 => 504,
        5 => 404,
        6 | 10 => 409,
        7 => 403,
        8 => 429,
        12 => 501,
        14 => 503,
        16 => 401,
        _ => 500,
    }
}

/// A set of gRPC status codes (0..=16), as a bit per code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GrpcCodes(u32);

impl GrpcCodes {
    /// What a caller of a service would call the service's failure, as
    /// issue 21 lists them: UNKNOWN (2), DEADLINE_EXCEEDED (4),
    /// RESOURCE_EXHAUSTED (8), INTERNAL (13) and UNAVAILABLE (14).
    /// NOT_FOUND, INVALID_ARGUMENT and the like are the caller's own
    /// mistakes, CANCELLED is the caller's choice, and DATA_LOSS (15) is
    /// left for `grpc_failure_codes` to add.
    pub const DEFAULT_FAILURES: GrpcCodes = GrpcCodes(1 << 2 | 1 << 4 | 1 << 8 | 1 << 13 | 1 << 14);

    /// The set of `codes`; codes past 16 are left out.
    pub fn of(codes: impl IntoIterator<Item = u32>) -> GrpcCodes {
        GrpcCodes(
            codes
                .into_iter()
                .filter(|&c| c <= GRPC_MAX_STATUS)
                .fold(0, |set, c| set | 1 << c),
        )
    }

    pub fn contains(self, code: u32) -> bool {
        code <= GRPC_MAX_STATUS && self.0 & (1 << code) != 0
    }

    /// The codes in the set, lowest first.
    pub fn codes(self) -> impl Iterator<Item = u32> {
        (0..=GRPC_MAX_STATUS).filter(move |&c| self.contains(c))
    }
}

impl Default for GrpcCodes {
    fn default() -> GrpcCodes {
        GrpcCodes::DEFAULT_FAILURES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_to_http_statuses() {
        let table: Vec<u16> = (0..=17).map(grpc_status_http).collect();
        assert_eq!(
            table,
            [
                200, 499, 500, 400, 504, 404, 409, 403, 429, 400, 409, 400, 501, 500, 503, 500,
                401, 500
            ]
        );
    }

    #[test]
    fn code_sets() {
        let failures = GrpcCodes::default();
        assert_eq!(failures.codes().collect::<Vec<_>>(), [2, 4, 8, 13, 14]);
        assert!(failures.contains(14) && !failures.contains(5) && !failures.contains(99));
        assert_eq!(
            GrpcCodes::of([0, 16, 17]).codes().collect::<Vec<_>>(),
            [0, 16]
        );
    }

    #[test]
    fn content_types() {
        assert!(is_grpc(Some(b"application/grpc")));
        assert!(is_grpc(Some(b"application/grpc+proto")));
        assert!(is_grpc(Some(b"Application/GRPC;charset=x")));
        assert!(!is_grpc(Some(b"application/grpc-web")));
        assert!(!is_grpc(Some(b"application/json")));
        assert!(!is_grpc(None));
    }

    #[test]
    fn timeouts() {
        assert_eq!(
            parse_grpc_timeout(b"250m"),
            Some(Duration::from_millis(250))
        );
        assert_eq!(parse_grpc_timeout(b"2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse_grpc_timeout(b"1H"), Some(Duration::from_secs(3600)));
        assert_eq!(
            parse_grpc_timeout(b"99999999n"),
            Some(Duration::from_nanos(99_999_999))
        );
        assert_eq!(parse_grpc_timeout(b"123456789m"), None);
        assert_eq!(parse_grpc_timeout(b"5x"), None);
        assert_eq!(parse_grpc_timeout(b"m"), None);
        assert_eq!(parse_grpc_timeout(b""), None);
    }

    #[test]
    fn methods() {
        assert_eq!(
            grpc_method("/grpc.health.v1.Health/Check"),
            Some(("grpc.health.v1.Health", "Check"))
        );
        assert_eq!(grpc_method("/v1/chat/completions"), None);
        assert_eq!(grpc_method("/nomethod"), None);
    }

    #[test]
    fn messages_are_percent_encoded() {
        assert_eq!(
            grpc_message("set `protocol: h2c` 100%"),
            "set `protocol: h2c` 100%25"
        );
        assert_eq!(grpc_message("é\n"), "%C3%A9%0A");
    }
}
