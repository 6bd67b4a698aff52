//! `GET /ui`: the web console, static files built from `control/ui/` by
//! `scripts/build-ui.sh` and embedded here, so that the binary serves them
//! offline and `cargo build` needs no Node. They hold no data and need no
//! token: the page asks `/v1/` for everything, with the token the operator
//! typed in, kept in the tab's session storage.

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, X_CONTENT_TYPE_OPTIONS};
use http::{HeaderValue, StatusCode};

use super::respond::{self, ApiResponse};

const PAGE: &[u8] = include_bytes!("../../ui/dist/index.html");
const SCRIPT: &[u8] = include_bytes!("../../ui/dist/console.js");
const STYLE: &[u8] = include_bytes!("../../ui/dist/console.css");
const ICON: &[u8] = include_bytes!("../../ui/dist/favicon.svg");

/// Only the console's own files load, nothing inline runs, no other site
/// may frame it (a framed console could be clicked into stopping a fault).
const POLICY: &str =
    "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub(super) fn page() -> ApiResponse {
    let mut response = file("text/html; charset=utf-8", PAGE);
    response
        .headers_mut()
        .insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    response
}

pub(super) fn script() -> ApiResponse {
    file("text/javascript; charset=utf-8", SCRIPT)
}

pub(super) fn style() -> ApiResponse {
    file("text/css; charset=utf-8", STYLE)
}

/// Named by the page, so that the browser does not ask for `/favicon.ico`.
pub(super) fn icon() -> ApiResponse {
    file("image/svg+xml", ICON)
}

fn file(content_type: &'static str, body: &'static [u8]) -> ApiResponse {
    let mut response = respond::with_type(StatusCode::OK, content_type, Bytes::from_static(body));
    let headers = response.headers_mut();
    // A new binary may bring a new console: revalidate rather than keep a stale one.
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}
