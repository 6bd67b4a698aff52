//! What route matching reads from a pingora request.

use sluice_filters::RequestView;

pub(super) struct PingoraRequest<'a>(pub &'a pingora::http::RequestHeader);

impl RequestView for PingoraRequest<'_> {
    fn path(&self) -> &str {
        self.0.uri.path()
    }

    fn host(&self) -> Option<&str> {
        self.0
            .uri
            .authority()
            .map(|a| a.as_str())
            .or_else(|| self.0.headers.get("host").and_then(|h| h.to_str().ok()))
    }

    fn header(&self, name: &str) -> Option<&[u8]> {
        self.0.headers.get(name).map(|v| v.as_bytes())
    }
}
