//! The control API's error answers as `path: message` lines. The API
//! answers `{"error": MESSAGE, "path": PATH?}`, or `{"errors": [{"path",
//! "message"}, ...]}` for a rejected config or item (see
//! `control/src/api/respond.rs`); any other body is shown as its text.

use std::process::ExitCode;

use http::StatusCode;
use serde_json::Value;

/// The lines to print for an error answer: one per error, `path: message`
/// (the message alone where the error has no path).
pub(crate) fn error_lines(status: StatusCode, body: &str) -> Vec<String> {
    let parsed = serde_json::from_str::<Value>(body).ok();
    if let Some(lines) = parsed.as_ref().and_then(known_shape) {
        return lines;
    }
    match body.trim() {
        "" => vec![status.to_string()],
        text => text.lines().map(str::to_string).collect(),
    }
}

/// The lines of the two shapes the API answers with; `None` for any other.
fn known_shape(value: &Value) -> Option<Vec<String>> {
    if let Some(errors) = value.get("errors").and_then(Value::as_array) {
        return errors
            .iter()
            .map(|e| Some(at(e.get("path"), e.get("message")?.as_str()?)))
            .collect::<Option<Vec<String>>>()
            .filter(|lines| !lines.is_empty());
    }
    let message = value.get("error")?.as_str()?;
    Some(vec![at(value.get("path"), message)])
}

fn at(path: Option<&Value>, message: &str) -> String {
    match path.and_then(Value::as_str) {
        Some(path) if !path.is_empty() => format!("{path}: {message}"),
        _ => message.to_string(),
    }
}

/// Prints an error answer on stderr; the exit code: 2 when the request was
/// refused (4xx: fix the request), 1 when the server failed (5xx).
pub(crate) fn report(status: StatusCode, body: &str) -> ExitCode {
    for line in error_lines(status, body) {
        eprintln!("{line}");
    }
    ExitCode::from(if status.is_client_error() { 2 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_error_with_a_path_reads_path_colon_message() {
        let body = r#"{"error":"unknown route `nope`","path":"route"}"#;
        assert_eq!(
            error_lines(StatusCode::NOT_FOUND, body),
            ["route: unknown route `nope`"]
        );
        let body = r#"{"error":"missing or wrong bearer token"}"#;
        assert_eq!(
            error_lines(StatusCode::UNAUTHORIZED, body),
            ["missing or wrong bearer token"]
        );
    }

    #[test]
    fn a_list_of_errors_gives_a_line_each_and_an_empty_path_the_message_alone() {
        let body = r#"{"errors":[
            {"path":"routes[0].split.nope","message":"unknown cluster `nope`"},
            {"path":"ttl","message":"required"},
            {"path":"","message":"body is not UTF-8"}]}"#;
        assert_eq!(
            error_lines(StatusCode::BAD_REQUEST, body),
            [
                "routes[0].split.nope: unknown cluster `nope`",
                "ttl: required",
                "body is not UTF-8"
            ]
        );
    }

    #[test]
    fn other_bodies_are_shown_as_their_text_and_an_empty_one_as_the_status() {
        let json = r#"{"detail":"something else"}"#;
        assert_eq!(error_lines(StatusCode::BAD_GATEWAY, json), [json]);
        let empty_list = r#"{"errors":[]}"#;
        assert_eq!(
            error_lines(StatusCode::BAD_REQUEST, empty_list),
            [empty_list]
        );
        assert_eq!(
            error_lines(StatusCode::BAD_GATEWAY, "upstream down\nretry later\n"),
            ["upstream down", "retry later"]
        );
        assert_eq!(
            error_lines(StatusCode::SERVICE_UNAVAILABLE, " \n"),
            ["503 Service Unavailable"]
        );
    }
}
