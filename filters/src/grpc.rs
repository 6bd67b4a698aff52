//! gRPC over HTTP/2, as the proxy sees it: which requests are gRPC, their
//! `grpc-timeout`, their method, and the `grpc-message` text of an error the
//! proxy writes itself. Pure: callers pass header values.

use std::time::Duration;

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

#[cfg(test)]
mod tests {
    use super::*;

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
