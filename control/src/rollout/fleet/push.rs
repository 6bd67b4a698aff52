//! The calls to the targets' control APIs: one round applies one weight to
//! a set of targets, `fanout.concurrency` calls at a time, each bounded by
//! `fanout.timeout`. A target's split is read first (`GET /v1/routes`) and
//! only the rollout's two clusters are changed in it, since a `PUT`
//! replaces the split whole and other clusters keep their weights; a target
//! that already has the weights is not written again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use http::{Method, Request, StatusCode};
use http_body_util::Full;
use serde::Deserialize;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::config::{Fanout, RolloutConfig};
use crate::http_client::{excerpt, HttpClient};

/// A route list is small; this only guards against a wrong URL.
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// What a successful call did to its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Applied {
    /// It had the weights already: nothing written.
    Unchanged,
    /// Its split was written.
    Written,
}

/// What one round applies.
#[derive(Clone, Debug)]
pub(crate) struct Job {
    pub urls: Vec<String>,
    pub route: String,
    pub stable: String,
    pub canary: String,
    pub weight: u32,
    pub token_env: String,
    pub fanout: Fanout,
}

impl Job {
    pub(crate) fn new(c: &RolloutConfig, urls: Vec<String>, weight: u32) -> Job {
        Job {
            urls,
            route: c.route.clone(),
            stable: c.stable.clone(),
            canary: c.canary.clone(),
            weight,
            token_env: c.target_token_env.clone(),
            fanout: c.fanout,
        }
    }
}

/// Calls the targets' control APIs; one pooled client for every round, so
/// connections to the targets are kept between rounds.
pub(crate) struct Pusher {
    client: HttpClient,
}

#[derive(Deserialize)]
struct RouteView {
    name: String,
    split: BTreeMap<String, u32>,
}

impl Pusher {
    pub(crate) fn new() -> Pusher {
        Pusher {
            // Each round bounds its calls by its own `fanout.timeout`.
            client: HttpClient::new(Duration::from_secs(2), MAX_ANSWER_BYTES),
        }
    }

    /// Applies `job` to each of its targets, `fanout.concurrency` at a
    /// time; one result per target.
    pub(crate) async fn push(&self, job: &Job) -> Vec<(String, Result<Applied, String>)> {
        // Read at every round, so that a token set (or rotated) after the
        // start is picked up.
        let token = match std::env::var(&job.token_env) {
            Ok(t) if !t.trim().is_empty() => t.trim().to_string(),
            _ => {
                let e = format!("token variable `{}` is not set", job.token_env);
                return job
                    .urls
                    .iter()
                    .map(|u| (u.clone(), Err(e.clone())))
                    .collect();
            }
        };
        let client = self.client.within(job.fanout.timeout);
        let slots = Arc::new(Semaphore::new(job.fanout.concurrency.max(1)));
        let mut calls = JoinSet::new();
        for url in &job.urls {
            // Waits for a slot before spawning: a thousand targets are a
            // thousand calls in turn, not a thousand tasks at once.
            let Ok(slot) = slots.clone().acquire_owned().await else {
                break;
            };
            let (client, job, token, url) =
                (client.clone(), job.clone(), token.clone(), url.clone());
            calls.spawn(async move {
                let result = apply(&client, &url, &job, &token).await;
                drop(slot);
                (url, result)
            });
        }
        let mut results = Vec::with_capacity(job.urls.len());
        while let Some(joined) = calls.join_next().await {
            if let Ok(r) = joined {
                results.push(r);
            }
        }
        // A call that ended without a result (a panic) is a failure too.
        for url in &job.urls {
            if !results.iter().any(|(u, _)| u == url) {
                results.push((url.clone(), Err("the call did not finish".to_string())));
            }
        }
        results
    }
}

/// The split to write so that `stable` has `100 - weight` and `canary`
/// `weight`, other clusters as they are; `None` when `current` has them
/// already.
pub(crate) fn split_to_write(
    current: &BTreeMap<String, u32>,
    stable: &str,
    canary: &str,
    weight: u32,
) -> Option<BTreeMap<String, u32>> {
    let (s, c) = (100 - weight.min(100), weight.min(100));
    if current.get(stable) == Some(&s) && current.get(canary) == Some(&c) {
        return None;
    }
    let mut split = current.clone();
    split.insert(stable.to_string(), s);
    split.insert(canary.to_string(), c);
    Some(split)
}

/// One target: read its split, change the rollout's two clusters, write.
async fn apply(client: &HttpClient, base: &str, job: &Job, token: &str) -> Result<Applied, String> {
    let routes = call(
        client,
        Method::GET,
        &format!("{base}/v1/routes"),
        token,
        None,
    )
    .await?;
    let routes: Vec<RouteView> = serde_json::from_slice(&routes)
        .map_err(|e| format!("GET /v1/routes: not a route list ({e})"))?;
    let current = routes
        .into_iter()
        .find(|r| r.name == job.route)
        .map(|r| r.split)
        .ok_or_else(|| format!("no route `{}` there", job.route))?;
    let Some(split) = split_to_write(&current, &job.stable, &job.canary, job.weight) else {
        return Ok(Applied::Unchanged);
    };
    let body = serde_json::to_vec(&split).map_err(|e| e.to_string())?;
    let uri = format!("{base}/v1/routes/{}/split", job.route);
    call(client, Method::PUT, &uri, token, Some(body)).await?;
    Ok(Applied::Written)
}

/// One call; anything but 200 is an error quoting the answer.
async fn call(
    client: &HttpClient,
    method: Method,
    uri: &str,
    token: &str,
    body: Option<Vec<u8>>,
) -> Result<Bytes, String> {
    let what = format!("{method} {}", uri.find("/v1/").map_or(uri, |i| &uri[i..]));
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header(USER_AGENT, "sluice")
        .header(AUTHORIZATION, format!("Bearer {token}"))
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(body.map(Bytes::from).unwrap_or_default()))
        .map_err(|e| format!("{what}: {e}"))?;
    let answer = client.send(req).await.map_err(|e| format!("{what}: {e}"))?;
    if answer.status != StatusCode::OK {
        return Err(format!(
            "{what} answered {}: {}",
            answer.status,
            excerpt(&String::from_utf8_lossy(&answer.body), 200)
        ));
    }
    Ok(answer.body)
}
