//! Toxiproxy's routes: method and path to a call of [`Toxiproxy`], the
//! body read (at most [`MAX_BODY`]) and parsed as JSON, and the answer
//! written as Toxiproxy writes it: JSON, `text/plain` for `/version`,
//! errors as `{"error": "...", "status": N}`.

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use serde_json::Value;

use super::proxies::{Answer, Toxiproxy};

/// Toxiproxy's bodies are a proxy, a toxic or a list of proxies.
const MAX_BODY: usize = 1024 * 1024;

pub(super) async fn handle(
    api: &Toxiproxy,
    req: Request<hyper::body::Incoming>,
) -> Response<Full<Bytes>> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let wants_body = method == Method::POST;
    let body = if wants_body {
        match Limited::new(req.into_body(), MAX_BODY).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) => {
                return write(Answer::error(
                    StatusCode::BAD_REQUEST,
                    format!("bad request body: {e}"),
                ))
            }
        }
    } else {
        Bytes::new()
    };
    let json = || -> Result<Value, Answer> {
        if body.is_empty() {
            return Ok(Value::Object(Default::default()));
        }
        serde_json::from_slice(&body)
            .map_err(|e| Answer::error(StatusCode::BAD_REQUEST, format!("bad request body: {e}")))
    };
    let answer = match (&method, segments.as_slice()) {
        (&Method::GET, ["version"]) => Answer::text(super::proxies::VERSION),
        (&Method::GET, ["proxies"]) => api.list(),
        (&Method::POST, ["proxies"]) => json().map_or_else(|e| e, |b| api.create(&b)),
        (&Method::POST, ["populate"]) => json().map_or_else(|e| e, |b| api.populate(&b)),
        (&Method::POST, ["reset"]) => api.reset(),
        (&Method::GET, ["proxies", name]) => api.show(name),
        (&Method::POST, ["proxies", name]) => json().map_or_else(|e| e, |b| api.update(name, &b)),
        (&Method::DELETE, ["proxies", name]) => api.delete(name),
        (&Method::GET, ["proxies", name, "toxics"]) => api.toxics(name),
        (&Method::POST, ["proxies", name, "toxics"]) => {
            json().map_or_else(|e| e, |b| api.add_toxic(name, &b))
        }
        (&Method::GET, ["proxies", name, "toxics", toxic]) => api.toxic(name, toxic),
        (&Method::POST, ["proxies", name, "toxics", toxic]) => {
            json().map_or_else(|e| e, |b| api.update_toxic(name, toxic, &b))
        }
        (&Method::DELETE, ["proxies", name, "toxics", toxic]) => api.remove_toxic(name, toxic),
        (_, ["version" | "proxies" | "populate" | "reset"])
        | (_, ["proxies", _])
        | (_, ["proxies", _, "toxics"])
        | (_, ["proxies", _, "toxics", _]) => {
            Answer::error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
        }
        _ => Answer::error(StatusCode::NOT_FOUND, "not found"),
    };
    write(answer)
}

fn write(answer: Answer) -> Response<Full<Bytes>> {
    let (content_type, body) = match answer.body {
        Some(Value::String(text)) if answer.text => ("text/plain;charset=utf-8", Bytes::from(text)),
        Some(value) => (
            "application/json",
            Bytes::from(serde_json::to_vec(&value).unwrap_or_default()),
        ),
        None => ("application/json", Bytes::new()),
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = answer.status;
    if answer.status != StatusCode::NO_CONTENT {
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    response
}
