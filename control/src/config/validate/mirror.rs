//! Validation of `routes[].mirror`.

use super::super::raw::{RawCoverage, RawEmbeddings, RawMirror, RawPerturb};
use super::super::typed::*;
use super::Errors;
use sluice_filters::{Perturbation, SavedBaseline, PERTURBED_HEADER};

/// Amplification past this is a load test, not a shadow.
const MAX_COPIES: f64 = 16.0;
const MAX_NOISE_COPIES: u32 = 4;
/// The sender keeps a whole body per queued job.
const MAX_MAX_BODY: usize = 64 * 1024 * 1024;

pub(super) fn mirror(
    at: &str,
    raw: &RawMirror,
    split: &[(String, u32)],
    clusters: &[ClusterConfig],
    errs: &mut Errors,
) -> MirrorConfig {
    let at = format!("{at}.mirror");
    match clusters.iter().find(|c| c.name == raw.cluster) {
        None => errs.push(
            format!("{at}.cluster"),
            format!("unknown cluster `{}`", raw.cluster),
        ),
        Some(c) if c.kind == ClusterKind::Cache => errs.push(
            format!("{at}.cluster"),
            format!(
                "cluster `{}` is kind cache; only HTTP can be mirrored",
                c.name
            ),
        ),
        Some(c) if c.tls.is_some() => errs.push(
            format!("{at}.cluster"),
            format!(
                "cluster `{}` uses tls; mirror copies are sent over plain HTTP only",
                c.name
            ),
        ),
        Some(c) if raw.perturb.is_some() && c.kind != ClusterKind::Llm => errs.push(
            format!("{at}.perturb"),
            format!(
                "cluster `{}` is kind {}; only LLM prompts are perturbed",
                c.name,
                c.kind.as_str()
            ),
        ),
        Some(_) => {}
    }
    let compare = raw.compare.clone().unwrap_or_default();
    let noise_copies = compare.noise_copies.unwrap_or(0);
    if noise_copies > MAX_NOISE_COPIES {
        errs.push(
            format!("{at}.compare.noise_copies"),
            format!("{noise_copies} is over the limit of {MAX_NOISE_COPIES}"),
        );
    }
    if noise_copies > 0 {
        for (name, _) in split {
            if clusters.iter().any(|c| &c.name == name && c.tls.is_some()) {
                errs.push(
                    format!("{at}.compare.noise_copies"),
                    format!("split cluster `{name}` uses tls; noise copies are sent over plain HTTP only"),
                );
            }
        }
    }
    if let Some(ids) = &compare.ids {
        if !ids.starts_with('/') {
            errs.push(
                format!("{at}.compare.ids"),
                format!("`{ids}` is not a JSON pointer (it must start with `/`)"),
            );
        }
    }
    let min_similarity = compare.min_similarity.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&min_similarity) {
        errs.push(
            format!("{at}.compare.min_similarity"),
            format!("{min_similarity} is not within 0..=1"),
        );
    }
    if raw.stability == Some(true) {
        stability(errs, &at, raw);
    }
    let rewrite = raw.rewrite.clone().unwrap_or_default();
    let rewrite_headers = rewrite
        .headers
        .iter()
        .map(|(name, value)| {
            let path = format!("{at}.rewrite.headers.{name}");
            let lower = errs.header_name(path.clone(), name);
            if lower == "x-sluice-shadow" || lower == PERTURBED_HEADER || lower == "traceparent" {
                errs.push(
                    path.clone(),
                    format!("`{lower}` is set by the mirror itself"),
                );
            }
            if http::HeaderValue::from_str(value).is_err() {
                errs.push(path, format!("`{value}` is not a valid header value"));
            }
            (lower, value.clone())
        })
        .collect();
    if rewrite.model.as_deref() == Some("") {
        errs.push(format!("{at}.rewrite.model"), "must not be empty");
    }
    MirrorConfig {
        cluster: raw.cluster.clone(),
        percent: errs
            .percent(format!("{at}.percent"), raw.percent.as_ref())
            .unwrap_or(100.0),
        copies: copies(errs, format!("{at}.copies"), raw.copies),
        max_body: errs
            .size_within(
                format!("{at}.max_body"),
                raw.max_body.as_ref(),
                (1, MAX_MAX_BODY as u64),
                "1 ..= 64MiB",
            )
            .map_or(DEFAULT_MAX_BODY, |n| n as usize),
        rate_limit: errs.positive(format!("{at}.rate_limit"), raw.rate_limit),
        max_in_flight: match raw.max_in_flight {
            Some(0) => {
                errs.push(format!("{at}.max_in_flight"), "must be at least 1");
                DEFAULT_MAX_IN_FLIGHT
            }
            Some(n) => n as usize,
            None => DEFAULT_MAX_IN_FLIGHT,
        },
        sample_by: raw
            .sample_by
            .as_ref()
            .map(|h| errs.header_name(format!("{at}.sample_by"), h)),
        timeout: errs.duration(
            format!("{at}.timeout"),
            raw.timeout.as_deref(),
            DEFAULT_MIRROR_TIMEOUT,
        ),
        rewrite_headers,
        rewrite_model: rewrite.model,
        compare: CompareConfig {
            ids: compare.ids,
            noise_copies,
            keep_text: compare.keep_text.unwrap_or(false),
            min_similarity,
            embeddings: compare
                .embeddings
                .as_ref()
                .map(|e| embeddings(errs, &at, e, clusters)),
        },
        perturb: raw.perturb.as_ref().map(|p| perturb(errs, &at, p)),
        stability: raw.stability.unwrap_or(false),
    }
}

/// Answer stability compares several answers to one prompt by their
/// embeddings: it needs two copies at least, an embedder, and copies that
/// all ask the same prompt.
fn stability(errs: &mut Errors, at: &str, raw: &RawMirror) {
    let path = format!("{at}.stability");
    let copies = raw.copies.unwrap_or(1.0);
    if copies < 2.0 {
        errs.push(
            path.clone(),
            format!("needs copies of at least 2 (the answers to compare), found {copies}"),
        );
    }
    if raw.compare.as_ref().is_none_or(|c| c.embeddings.is_none()) {
        errs.push(
            path.clone(),
            "needs compare.embeddings (the answers are compared by their embeddings)",
        );
    }
    if raw.perturb.is_some() {
        errs.push(
            path,
            "cannot go with perturb: each copy's prompt is reworded apart, so the answers are to different prompts",
        );
    }
}

fn perturb(errs: &mut Errors, at: &str, raw: &RawPerturb) -> Perturbation {
    let (policy, problems) = raw.policy();
    for (key, message) in problems {
        errs.push(format!("{at}.perturb.{key}"), message);
    }
    policy
}

fn copies(errs: &mut Errors, path: String, raw: Option<f64>) -> f64 {
    let value = raw.unwrap_or(1.0);
    if !(value > 0.0 && value <= MAX_COPIES) {
        errs.push(
            path,
            format!("{value} is not within 0 (excluded) ..= {MAX_COPIES}"),
        );
    }
    value
}

const DEFAULT_SIMILARITY_MIN: f64 = 0.82;
const DEFAULT_KL_MAX: f64 = 0.38;
const DEFAULT_DRIFT_WINDOW: usize = 50;
const MAX_DRIFT_WINDOW: u32 = 10_000;

fn embeddings(
    errs: &mut Errors,
    at: &str,
    raw: &RawEmbeddings,
    clusters: &[ClusterConfig],
) -> EmbeddingsConfig {
    let at = format!("{at}.compare.embeddings");
    match clusters.iter().find(|c| c.name == raw.cluster) {
        None => errs.push(
            format!("{at}.cluster"),
            format!("unknown cluster `{}`", raw.cluster),
        ),
        Some(c) if c.kind != ClusterKind::Llm => errs.push(
            format!("{at}.cluster"),
            format!(
                "cluster `{}` is kind {}; the embedder must be kind llm (an OpenAI-compatible /v1/embeddings)",
                c.name,
                c.kind.as_str()
            ),
        ),
        Some(c) if c.tls.is_some() => errs.push(
            format!("{at}.cluster"),
            format!("cluster `{}` uses tls; the mirror sender speaks plain HTTP only", c.name),
        ),
        Some(_) => {}
    }
    let similarity_min = raw.similarity_min.unwrap_or(DEFAULT_SIMILARITY_MIN);
    if !(-1.0..=1.0).contains(&similarity_min) {
        errs.push(
            format!("{at}.similarity_min"),
            format!("{similarity_min} is not within -1..=1"),
        );
    }
    let kl_max = raw.kl_max.unwrap_or(DEFAULT_KL_MAX);
    if !(kl_max > 0.0 && kl_max.is_finite()) {
        errs.push(
            format!("{at}.kl_max"),
            format!("must be greater than 0, found {kl_max}"),
        );
    }
    let window = match raw.window {
        None => DEFAULT_DRIFT_WINDOW,
        Some(n) if (1..=MAX_DRIFT_WINDOW).contains(&n) => n as usize,
        Some(n) => {
            errs.push(
                format!("{at}.window"),
                format!("{n} is not within 1..={MAX_DRIFT_WINDOW}"),
            );
            DEFAULT_DRIFT_WINDOW
        }
    };
    if raw.model.as_deref() == Some("") {
        errs.push(format!("{at}.model"), "must not be empty");
    }
    EmbeddingsConfig {
        cluster: raw.cluster.clone(),
        model: raw.model.clone(),
        similarity_min,
        kl_max,
        window,
        baseline: raw
            .baseline
            .as_deref()
            .and_then(|path| baseline(errs, &format!("{at}.baseline"), path)),
        coverage: raw
            .coverage
            .as_ref()
            .map(|c| coverage(errs, &format!("{at}.coverage"), c)),
    }
}

const DEFAULT_COVERAGE_SAMPLE: f64 = 0.2;
const DEFAULT_COVERAGE_PER_SECOND: u32 = 20;
const MAX_COVERAGE_CLUSTERS: u32 = 4096;

fn coverage(errs: &mut Errors, at: &str, raw: &RawCoverage) -> CoverageConfig {
    let sample = raw.sample.unwrap_or(DEFAULT_COVERAGE_SAMPLE);
    if !(sample > 0.0 && sample <= 1.0) {
        errs.push(
            format!("{at}.sample"),
            format!("{sample} is not within 0 (excluded) ..= 1"),
        );
    }
    let max_per_second = raw.max_per_second.unwrap_or(DEFAULT_COVERAGE_PER_SECOND);
    if max_per_second == 0 {
        errs.push(format!("{at}.max_per_second"), "must be at least 1");
    }
    let similarity = raw
        .similarity
        .unwrap_or(sluice_filters::DEFAULT_COVERAGE_SIMILARITY);
    if !(similarity > 0.0 && similarity <= 1.0) {
        errs.push(
            format!("{at}.similarity"),
            format!("{similarity} is not within 0 (excluded) ..= 1"),
        );
    }
    let max_clusters = match raw.max_clusters {
        None => sluice_filters::DEFAULT_MAX_CLUSTERS,
        Some(n) if (1..=MAX_COVERAGE_CLUSTERS).contains(&n) => n as usize,
        Some(n) => {
            errs.push(
                format!("{at}.max_clusters"),
                format!("{n} is not within 1..={MAX_COVERAGE_CLUSTERS}"),
            );
            sluice_filters::DEFAULT_MAX_CLUSTERS
        }
    };
    CoverageConfig {
        sample,
        max_per_second,
        similarity,
        max_clusters,
    }
}

/// Reads a saved baseline now, so that a missing or bad file fails the
/// load (and a reload keeps the running config) instead of a drift reading
/// later.
fn baseline(errs: &mut Errors, at: &str, path: &str) -> Option<BaselineFile> {
    if path.is_empty() {
        errs.push(at, "must name a file");
        return None;
    }
    let read = std::fs::read_to_string(path).map_err(|e| e.to_string());
    match read.and_then(|text| SavedBaseline::parse(&text)) {
        Ok(saved) => Some(BaselineFile {
            path: path.to_owned(),
            similarities: saved.similarities,
        }),
        Err(e) => {
            errs.push(at, format!("{path}: {e}"));
            None
        }
    }
}
