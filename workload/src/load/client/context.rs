//! `context_sweep.to: auto`: the model's context size, asked of the target
//! once before the run: llama.cpp's `GET /props`, then vLLM's
//! `GET /v1/models`. The answers are read by the pure
//! [`context_from_props`] and [`context_from_models`].

use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as Pool;
use hyper_util::rt::TokioExecutor;

use super::connector;
use crate::load::scenario::{context_from_models, context_from_props, Target};

/// How long each of the two questions may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(10);
/// An answer larger than this is not one of the two (a model list is small).
const MAX_ANSWER: usize = 4 * 1024 * 1024;

/// The model's context in tokens, and where it was read (`GET /props`);
/// an error naming `context_sweep.to` and what each question got.
/// Blocking: it runs its own runtime on a thread of its own, so it may be
/// called from anywhere.
pub fn model_context(target: &Target) -> Result<(u64, &'static str), String> {
    let target = target.clone();
    std::thread::scope(|s| {
        s.spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("context_sweep.to: auto: {e}"))?;
            runtime.block_on(ask(&target))
        })
        .join()
        .unwrap_or_else(|_| Err("context_sweep.to: auto: the lookup failed".to_owned()))
    })
}

async fn ask(target: &Target) -> Result<(u64, &'static str), String> {
    let pool: Pool<_, Empty<Bytes>> =
        Pool::builder(TokioExecutor::new()).build(connector(&target.ca_certs)?);
    let props = get(&pool, target, "/props").await;
    if let Some(n) = props.as_ref().ok().and_then(|b| context_from_props(b)) {
        return Ok((n, "GET /props"));
    }
    let models = get(&pool, target, "/v1/models").await;
    if let Some(n) = models.as_ref().ok().and_then(|b| context_from_models(b)) {
        return Ok((n, "GET /v1/models"));
    }
    let why = |answer: Result<Bytes, String>, key: &str| match answer {
        Ok(_) => format!("no {key} in the answer"),
        Err(e) => e,
    };
    Err(format!(
        "context_sweep.to: auto: {} gave no context size (GET /props: {}; GET /v1/models: {}); \
         give context_sweep.to as a number of tokens",
        target.base_url,
        why(props, "default_generation_settings.n_ctx"),
        why(models, "data[0].max_model_len"),
    ))
}

/// An error with its causes (`client error (Connect): tcp connect error:
/// Connection refused`): hyper's own says only which stage failed.
fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}

/// The body of a 200 answer to `GET base_url + path`.
async fn get(
    pool: &Pool<HttpsConnector<HttpConnector>, Empty<Bytes>>,
    target: &Target,
    path: &str,
) -> Result<Bytes, String> {
    let mut request = Request::get(format!("{}{path}", target.base_url));
    for (name, value) in &target.headers {
        request = request.header(name, value);
    }
    let request = request.body(Empty::new()).map_err(|e| e.to_string())?;
    let exchange = async {
        let answer = pool.request(request).await.map_err(|e| causes(&e))?;
        let status = answer.status();
        let body = Limited::new(answer.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        match status.as_u16() {
            200 => Ok(body),
            code => Err(format!("status {code}")),
        }
    };
    tokio::time::timeout(ASK_TIMEOUT, exchange)
        .await
        .map_err(|_| format!("no answer in {} s", ASK_TIMEOUT.as_secs()))?
}
