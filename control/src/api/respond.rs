//! Building the API's JSON answers and reading request bodies within the
//! size limit.

use bytes::Bytes;
use http::header::{ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderValue, Method, Response, StatusCode};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Body;
use serde::Serialize;
use tracing::warn;

use crate::config::ConfigErrors;

/// Request bodies larger than this are refused with 413 unless
/// `admin.max_body` says otherwise.
pub const MAX_BODY_BYTES: usize = crate::config::DEFAULT_ADMIN_MAX_BODY;

pub(super) type ApiResponse = Response<Full<Bytes>>;

/// The `{error, path?}` body of every error but a rejected config.
#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<&'a str>,
}

/// The `{errors: [{path, message}]}` body of a rejected config.
#[derive(Serialize)]
struct ErrorsBody<'a> {
    errors: &'a [crate::config::ConfigError],
}

pub(super) fn json<T: Serialize + ?Sized>(status: StatusCode, value: &T) -> ApiResponse {
    match serde_json::to_vec(value) {
        Ok(body) => with_type(status, "application/json", body.into()),
        Err(e) => {
            warn!(error = %e, "cannot serialise an admin API answer");
            with_type(
                StatusCode::INTERNAL_SERVER_ERROR,
                "application/json",
                Bytes::from_static(br#"{"error":"cannot serialise the answer"}"#),
            )
        }
    }
}

pub(super) fn with_type(
    status: StatusCode,
    content_type: &'static str,
    body: Bytes,
) -> ApiResponse {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

pub(super) fn error(status: StatusCode, message: &str) -> ApiResponse {
    json(
        status,
        &ErrorBody {
            error: message,
            path: None,
        },
    )
}

pub(super) fn error_at(status: StatusCode, message: &str, path: &str) -> ApiResponse {
    json(
        status,
        &ErrorBody {
            error: message,
            path: Some(path),
        },
    )
}

/// The body, read as text by `parse` (YAML or JSON); a body that is not
/// UTF-8 is refused like one that does not parse.
pub(super) fn parse_body<T>(
    body: &[u8],
    parse: impl FnOnce(&str) -> Result<T, ConfigErrors>,
) -> Result<T, ConfigErrors> {
    match std::str::from_utf8(body) {
        Ok(text) => parse(text),
        Err(e) => Err(ConfigErrors(vec![crate::config::ConfigError::new(
            "",
            format!("body is not UTF-8: {e}"),
        )])),
    }
}

pub(super) fn config_errors(errors: &ConfigErrors) -> ApiResponse {
    json(StatusCode::BAD_REQUEST, &ErrorsBody { errors: &errors.0 })
}

pub(super) fn not_found(method: &Method, path: &str) -> ApiResponse {
    error(
        StatusCode::NOT_FOUND,
        &format!("no such endpoint: {method} {path}"),
    )
}

/// 405 with the methods the path does answer.
pub(super) fn wrong_method(method: &Method, path: &str, allow: &str) -> ApiResponse {
    let mut response = error(
        StatusCode::METHOD_NOT_ALLOWED,
        &format!("{method} is not allowed on {path}; use {allow}"),
    );
    if let Ok(value) = HeaderValue::from_str(allow) {
        response.headers_mut().insert(ALLOW, value);
    }
    response
}

/// Reads a whole request body of at most `max` bytes (`admin.max_body`). The
/// error is the answer to send.
pub(super) async fn read_body<B>(
    headers: &http::HeaderMap,
    body: B,
    max: usize,
) -> Result<Bytes, ApiResponse>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let too_large = || {
        let mut response = error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("request body is over {max} bytes (admin.max_body)"),
        );
        // The rest of the body is unread: close rather than drain it.
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
        response
    };
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    match Limited::new(body, max).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
        Err(e) => Err(error(
            StatusCode::BAD_REQUEST,
            &format!("cannot read the request body: {e}"),
        )),
    }
}
