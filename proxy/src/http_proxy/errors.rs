//! Maps pingora's errors onto sluice's [`Failure`] kinds; the status and
//! body come from `sluice_filters::Failure`, the one mapping.

use pingora::{Error, ErrorSource, ErrorType};
use sluice_filters::Failure;

/// `None` when the client went away: there is nobody to answer.
pub(crate) fn classify(e: &Error) -> Option<Failure> {
    use ErrorType::*;
    let failure = match (e.esource(), e.etype()) {
        // Before the upstream's errors: pingora marks a failed connect as
        // the upstream's, and `max_connections` refuses one.
        (_, Custom(super::breakers::OVERFLOW)) => Failure::Overflow,
        (_, ConnectTimedout) => Failure::ConnectTimeout,
        (_, ConnectRefused | ConnectNoRoute | ConnectError | ConnectProxyFailure) => {
            Failure::ConnectError
        }
        (_, TLSHandshakeFailure | TLSHandshakeTimedout | InvalidCert) => Failure::ConnectError,
        (ErrorSource::Upstream, ReadTimedout | WriteTimedout) => Failure::UpstreamTimeout,
        (ErrorSource::Upstream, _) => Failure::UpstreamError,
        (ErrorSource::Downstream, ReadError | WriteError | ConnectionClosed) => return None,
        (ErrorSource::Downstream, _) => Failure::BadRequest,
        (_, HTTPStatus(s)) if *s == 404 => Failure::NoRoute,
        // Raised by the request body filter past the route's `max_body`.
        (_, HTTPStatus(413)) => Failure::BodyTooLarge,
        _ => Failure::Internal,
    };
    Some(failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_breaker_refusal_is_an_overflow_even_when_marked_the_upstreams() {
        // pingora marks a failed connect as the upstream's: the connector's
        // `max_connections` refusal reaches `fail_to_proxy` so.
        let mut e = Error::explain(ErrorType::Custom(super::super::breakers::OVERFLOW), "full");
        assert_eq!(classify(&e), Some(Failure::Overflow));
        e.as_up();
        assert_eq!(classify(&e), Some(Failure::Overflow));
        let mut refused = Error::explain(ErrorType::ConnectRefused, "refused");
        refused.as_up();
        assert_eq!(classify(&refused), Some(Failure::ConnectError));
    }
}
