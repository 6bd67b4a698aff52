//! Fleet mode's writing half: a rollout with `targets` applies each weight
//! change through every target's control API (`PUT /v1/routes/{route}/split`
//! with the bearer token from `target_token_env`), and the change counts as
//! applied only once every target has answered 200. Targets that failed are
//! listed in the rollout's status and in the audit log, and are retried at
//! every evaluation until all have it.
//!
//! A target's split is read first (`GET /v1/routes`) and only the rollout's
//! two clusters are changed in it, since a `PUT` replaces the split whole
//! and other clusters keep their weights; a target that already has the
//! weights is not written again.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use http::{Method, Request, StatusCode};
use http_body_util::Full;
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use crate::config::RolloutConfig;
use crate::http_client::{excerpt, HttpClient};

/// Bounds each call to a target: connect, answer and body together.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// A route list is small; this only guards against a wrong URL.
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// One target as the status shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TargetStatus {
    pub url: String,
    /// The canary weight it last accepted (`None`: none yet).
    pub weight: Option<u32>,
    /// It still has to take the rollout's weight.
    pub pending: bool,
    /// Attempts in a row that failed.
    pub failures: u32,
    /// Why the last attempt failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Every target of one rollout, in config order.
#[derive(Debug, Default)]
pub(crate) struct Targets {
    list: Vec<TargetStatus>,
}

/// What one round of applying changed.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Round {
    /// Targets that failed this round.
    pub failed: usize,
    /// `url: error` of those that had not failed before: a target down
    /// for an hour is reported once, not at every retry.
    pub first_failures: Vec<String>,
}

impl Targets {
    pub(super) fn new(urls: &[String]) -> Targets {
        let mut t = Targets::default();
        t.follow(urls);
        t
    }

    /// Follows a changed `targets` list: kept targets keep their state,
    /// new ones are pending. `true` when a target was added.
    pub(super) fn follow(&mut self, urls: &[String]) -> bool {
        if self.list.iter().map(|t| &t.url).eq(urls.iter()) {
            return false;
        }
        let mut old = std::mem::take(&mut self.list);
        let mut added = false;
        for url in urls {
            let kept = old
                .iter()
                .position(|t| &t.url == url)
                .map(|i| old.remove(i));
            added |= kept.is_none();
            self.list.push(kept.unwrap_or_else(|| TargetStatus {
                url: url.clone(),
                weight: None,
                pending: true,
                failures: 0,
                error: None,
            }));
        }
        added
    }

    /// A new weight to apply: every target has to take it, even one that
    /// has it already (resume re-sets a weight moved by hand).
    pub(super) fn want(&mut self) {
        for t in &mut self.list {
            t.pending = true;
        }
    }

    /// The targets still to take the weight.
    pub(super) fn due(&self) -> Vec<String> {
        self.list
            .iter()
            .filter(|t| t.pending)
            .map(|t| t.url.clone())
            .collect()
    }

    pub(super) fn len(&self) -> usize {
        self.list.len()
    }

    /// Records a round that applied `weight`. A target that took it stays
    /// pending when the rollout wants another weight by now (`want`).
    pub(super) fn record(
        &mut self,
        weight: u32,
        want: Option<u32>,
        results: Vec<(String, Result<(), String>)>,
    ) -> Round {
        let mut round = Round::default();
        for (url, result) in results {
            let Some(t) = self.list.iter_mut().find(|t| t.url == url) else {
                continue;
            };
            match result {
                Ok(()) => {
                    t.weight = Some(weight);
                    t.pending = t.pending && want != Some(weight);
                    t.failures = 0;
                    t.error = None;
                }
                Err(e) => {
                    t.failures += 1;
                    round.failed += 1;
                    if t.failures == 1 {
                        round.first_failures.push(format!("{url}: {e}"));
                    }
                    t.error = Some(e);
                }
            }
        }
        round
    }

    pub(super) fn status(&self) -> Vec<TargetStatus> {
        self.list.clone()
    }
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
}

impl Job {
    pub(super) fn new(c: &RolloutConfig, urls: Vec<String>, weight: u32) -> Job {
        Job {
            urls,
            route: c.route.clone(),
            stable: c.stable.clone(),
            canary: c.canary.clone(),
            weight,
            token_env: c.target_token_env.clone(),
        }
    }
}

/// Calls the targets' control APIs.
pub(crate) struct Pusher {
    client: HttpClient,
}

#[derive(Deserialize)]
struct RouteView {
    name: String,
    split: BTreeMap<String, u32>,
}

impl Pusher {
    pub(super) fn new() -> Pusher {
        Pusher {
            client: HttpClient::new(CALL_TIMEOUT, MAX_ANSWER_BYTES),
        }
    }

    /// Applies `job` to each of its targets at once; one result per target.
    pub(super) async fn push(&self, job: &Job) -> Vec<(String, Result<(), String>)> {
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
        let mut calls = JoinSet::new();
        for url in &job.urls {
            let (client, job, token, url) =
                (self.client.clone(), job.clone(), token.clone(), url.clone());
            calls.spawn(async move {
                let result = apply(&client, &url, &job, &token).await;
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

/// One target: read its split, change the rollout's two clusters, write.
async fn apply(client: &HttpClient, base: &str, job: &Job, token: &str) -> Result<(), String> {
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
    let mut split = routes
        .into_iter()
        .find(|r| r.name == job.route)
        .map(|r| r.split)
        .ok_or_else(|| format!("no route `{}` there", job.route))?;
    let (stable, canary) = (100 - job.weight.min(100), job.weight.min(100));
    if split.get(&job.stable) == Some(&stable) && split.get(&job.canary) == Some(&canary) {
        return Ok(());
    }
    split.insert(job.stable.clone(), stable);
    split.insert(job.canary.clone(), canary);
    let body = serde_json::to_vec(&split).map_err(|e| e.to_string())?;
    let uri = format!("{base}/v1/routes/{}/split", job.route);
    call(client, Method::PUT, &uri, token, Some(body)).await?;
    Ok(())
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

#[cfg(test)]
mod tests;
