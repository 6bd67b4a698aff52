//! `GET /v1/openapi.json`: the API as an OpenAPI 3.1 document. Its paths and
//! methods are the endpoint table's rows, nothing else; what each row takes and
//! answers is its [`Spec`], from an exhaustive match over the table
//! (`openapi/spec.rs`), so an endpoint cannot be added without its schemas.

mod schemas;
mod spec;

use std::sync::OnceLock;

use bytes::Bytes;
use http::StatusCode;
use serde_json::{json, Map, Value};

use super::endpoints::{is_placeholder, ApiEndpoint};
use super::respond::{self, ApiResponse};
use crate::rollout::Command;
use spec::{Body, Spec};

/// The document, built once: it depends on the code only.
pub(super) fn get() -> ApiResponse {
    static DOCUMENT: OnceLock<Bytes> = OnceLock::new();
    let body = DOCUMENT.get_or_init(|| match serde_json::to_vec(&document()) {
        Ok(bytes) => Bytes::from(bytes),
        Err(_) => Bytes::from_static(b"{}"),
    });
    respond::with_type(StatusCode::OK, "application/json", body.clone())
}

/// The whole document.
pub(super) fn document() -> Value {
    let mut paths = Map::new();
    for &endpoint in ApiEndpoint::ALL {
        let item = paths
            .entry(endpoint.template())
            .or_insert_with(|| json!({}));
        if let Value::Object(item) = item {
            item.insert(endpoint.method().to_lowercase(), operation(endpoint));
        }
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "sluice control API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Health, readiness and metrics without a token; everything under /v1/ \
                behind `Authorization: Bearer TOKEN` (admin.token_env, admin.token_file or \
                admin.tokens). Each operation needs a scope (`x-sluice-scope`: read, write or \
                admin; admin covers write, write covers read): 401 without a known token, 403 \
                with too small a scope, 429 (with retry-after) from an address that failed to \
                authenticate too often. Bodies that take YAML or JSON are documented as JSON. \
                See docs/control-api.md.",
        },
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas::components(),
        },
        "security": [{"bearer": []}],
    })
}

fn operation(endpoint: ApiEndpoint) -> Value {
    let spec = Spec::of(endpoint);
    let guarded = endpoint.template().starts_with("/v1/");
    let mut responses = Map::new();
    for (status, schema) in spec.answers {
        responses.insert(status.to_string(), answer(*status, schema));
    }
    if guarded {
        responses.insert("401".into(), answer(401, &"Error"));
        responses.insert("403".into(), answer(403, &"Forbidden"));
        responses.insert("429".into(), answer(429, &"Error"));
    }
    if matches!(spec.body, Body::Json(_)) {
        // Bounded before parsing (admin.max_body, admin.max_body_depth).
        responses
            .entry("400")
            .or_insert_with(|| answer(400, &"AnyError"));
        responses.insert("413".into(), answer(413, &"Error"));
    }
    let mut op = json!({
        "operationId": format!("{endpoint:?}"),
        "summary": spec.summary,
        "tags": [tag(endpoint)],
        "responses": responses,
    });
    let parameters = parameters(endpoint);
    if !parameters.is_empty() {
        op["parameters"] = Value::Array(parameters);
    }
    if let Body::Json(schema) = spec.body {
        op["requestBody"] = json!({
            "required": true,
            "content": {"application/json": {"schema": schemas::reference(schema)}},
        });
    }
    if !guarded {
        op["security"] = json!([]);
    }
    if let Some(scope) = endpoint.scope() {
        op["x-sluice-scope"] = json!(scope.as_str());
    }
    op
}

/// One answer: the schema's name in `components` (or `text` for `/metrics`,
/// `html`, `javascript`, `css` and `svg` for the console's files).
fn answer(status: u16, schema: &&str) -> Value {
    let description = StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("answer");
    let text = |media: &str| {
        json!({
            "description": description,
            "content": {media: {"schema": {"type": "string"}}},
        })
    };
    match *schema {
        "text" => text("text/plain"),
        "html" => text("text/html"),
        "javascript" => text("text/javascript"),
        "css" => text("text/css"),
        "svg" => text("image/svg+xml"),
        name => json!({
            "description": description,
            "content": {"application/json": {"schema": schemas::reference(name)}},
        }),
    }
}

/// The template's `{placeholders}` as path parameters; `{command}` takes
/// [`Command`]'s names.
fn parameters(endpoint: ApiEndpoint) -> Vec<Value> {
    endpoint
        .template()
        .split('/')
        .filter(|s| is_placeholder(s))
        .map(|s| {
            let name = &s[1..s.len() - 1];
            let schema = match name {
                "command" => {
                    let names: Vec<&str> = Command::ALL.iter().map(|c| c.as_str()).collect();
                    json!({"type": "string", "enum": names})
                }
                _ => json!({"type": "string", "minLength": 1}),
            };
            json!({"name": name, "in": "path", "required": true, "schema": schema})
        })
        .collect()
}

/// The group an endpoint is listed under: its path's second segment.
fn tag(endpoint: ApiEndpoint) -> &'static str {
    let template = endpoint.template();
    match template.strip_prefix("/v1/") {
        Some(rest) => rest.split(['/', '.']).next().unwrap_or(rest),
        None if template.starts_with("/ui") => "console",
        None => "health",
    }
}

#[cfg(test)]
mod tests;
