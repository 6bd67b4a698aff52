//! Why a request failed inside the proxy, and the one mapping from that to
//! the HTTP status and JSON body the client sees.

/// A failure the proxy reports itself (as opposed to an upstream's own answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Failure {
    /// No route matched the request.
    NoRoute,
    /// The matched route has every weight at 0.
    NoCluster,
    /// The upstream refused or could not be reached.
    ConnectError,
    /// The upstream did not accept the connection in time.
    ConnectTimeout,
    /// The upstream accepted but did not answer (or went quiet) in time.
    UpstreamTimeout,
    /// The upstream broke the connection or sent something unreadable.
    UpstreamError,
    /// The client's request could not be read.
    BadRequest,
    /// Anything else inside the proxy.
    Internal,
    /// A gRPC request routed to a cluster that speaks only HTTP/1.1.
    NeedsHttp2,
    /// The request body is longer than the route's `max_body`.
    BodyTooLarge,
    /// A circuit breaker of the cluster is open.
    Overflow,
    /// An HTTP/2 request's target is longer than the listener's
    /// `max_uri_bytes` (HTTP/1.1 heads are refused before they are parsed).
    UriTooLong,
}

impl Failure {
    pub const ALL: [Failure; 12] = [
        Failure::NoRoute,
        Failure::NoCluster,
        Failure::ConnectError,
        Failure::ConnectTimeout,
        Failure::UpstreamTimeout,
        Failure::UpstreamError,
        Failure::BadRequest,
        Failure::Internal,
        Failure::NeedsHttp2,
        Failure::BodyTooLarge,
        Failure::Overflow,
        Failure::UriTooLong,
    ];

    pub fn status(self) -> u16 {
        match self {
            Failure::NoRoute => 404,
            Failure::NoCluster | Failure::Overflow => 503,
            Failure::ConnectError | Failure::UpstreamError | Failure::NeedsHttp2 => 502,
            Failure::ConnectTimeout | Failure::UpstreamTimeout => 504,
            Failure::BadRequest => 400,
            Failure::Internal => 500,
            Failure::BodyTooLarge => 413,
            Failure::UriTooLong => 414,
        }
    }

    /// The `reason` label and the `error` field of the JSON body.
    pub fn reason(self) -> &'static str {
        match self {
            Failure::NoRoute => "no_route",
            Failure::NoCluster => "no_cluster",
            Failure::ConnectError => "connect_error",
            Failure::ConnectTimeout => "connect_timeout",
            Failure::UpstreamTimeout => "upstream_timeout",
            Failure::UpstreamError => "upstream_error",
            Failure::BadRequest => "bad_request",
            Failure::Internal => "internal",
            Failure::NeedsHttp2 => "needs_http2",
            Failure::BodyTooLarge => "body_too_large",
            Failure::Overflow => "overflow",
            Failure::UriTooLong => "uri_too_long",
        }
    }

    /// The `grpc-status` a gRPC client gets instead of [`Failure::status`]
    /// (as Envoy maps HTTP statuses to gRPC codes): what could not be
    /// reached is UNAVAILABLE (14), what took too long DEADLINE_EXCEEDED (4).
    pub fn grpc_status(self) -> u32 {
        match self {
            Failure::NoRoute => 12,
            Failure::NoCluster
            | Failure::ConnectError
            | Failure::ConnectTimeout
            | Failure::UpstreamError
            | Failure::NeedsHttp2
            | Failure::Overflow => 14,
            Failure::UpstreamTimeout => 4,
            Failure::BadRequest | Failure::Internal => 13,
            Failure::BodyTooLarge | Failure::UriTooLong => 8,
        }
    }

    /// The `retry-after` (seconds) the answer carries: a breaker closes
    /// as soon as some request ends, which nothing here can foresee.
    pub fn retry_after_secs(self) -> Option<u64> {
        match self {
            Failure::Overflow => Some(1),
            _ => None,
        }
    }

    /// The human-readable text, as the JSON body's `message` and gRPC's `grpc-message`.
    pub fn message(self) -> &'static str {
        match self {
            Failure::NoRoute => "no route matches this request",
            Failure::NoCluster => "every cluster of this route has weight 0",
            Failure::ConnectError => "could not connect to the upstream",
            Failure::ConnectTimeout => "timed out connecting to the upstream",
            Failure::UpstreamTimeout => "timed out waiting for the upstream",
            Failure::UpstreamError => "the upstream connection failed",
            Failure::BadRequest => "the request could not be read",
            Failure::Internal => "internal proxy error",
            Failure::NeedsHttp2 => {
                "gRPC needs HTTP/2 but the cluster speaks HTTP/1.1: set `protocol: h2c` on it"
            }
            Failure::BodyTooLarge => "the request body is larger than the route's max_body",
            Failure::Overflow => {
                "the cluster is at a circuit breaker's limit (max_requests in flight, max_pending waiting or max_connections open)"
            }
            Failure::UriTooLong => "the request target is longer than the listener's max_uri_bytes",
        }
    }
}

/// The JSON body of a proxy-generated error: `{"error", "message", "request_id"}`.
pub fn error_body(failure: Failure, request_id: &str) -> String {
    // Hand-written to keep serde out of this crate; every field is plain ASCII
    // except the request id, which is escaped.
    let mut id = String::with_capacity(request_id.len());
    for c in request_id.chars() {
        match c {
            '"' | '\\' => {
                id.push('\\');
                id.push(c);
            }
            c if c.is_control() => {}
            c => id.push(c),
        }
    }
    format!(
        "{{\"error\":\"{}\",\"message\":\"{}\",\"request_id\":\"{}\"}}",
        failure.reason(),
        failure.message(),
        id
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        assert_eq!(Failure::NoRoute.status(), 404);
        assert_eq!(Failure::ConnectError.status(), 502);
        assert_eq!(Failure::UpstreamTimeout.status(), 504);
    }

    #[test]
    fn grpc_statuses() {
        assert_eq!(Failure::ConnectError.grpc_status(), 14);
        assert_eq!(Failure::UpstreamTimeout.grpc_status(), 4);
        assert_eq!(Failure::NeedsHttp2.grpc_status(), 14);
        assert_eq!(Failure::NoRoute.grpc_status(), 12);
    }

    #[test]
    fn body_escapes_request_id() {
        assert_eq!(
            error_body(Failure::NoRoute, "a\"b\\c\n"),
            r#"{"error":"no_route","message":"no route matches this request","request_id":"a\"b\\c"}"#
        );
    }
}
