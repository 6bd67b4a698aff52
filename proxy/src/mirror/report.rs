//! After a job's copies are back: counts each by result, compares each
//! shadow answer with the primary's beyond the noise floor the noise copies
//! measured, records the figures, and keeps the pairs that differ.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use sluice_control::{ClusterKind, DiffLeg, DiffRecord, MirrorDiffs};
use sluice_filters::{
    answer_text, compare, differences, fingerprint, ids_at, Comparison, GrpcFramer, Leg,
    MirrorResult, NoiseFloor,
};

use super::copy::{CopyAnswer, CopyResult};
use super::embed::{ShadowText, Texts};
use super::job::{Answer, Job};
use super::limits::CopyKind;

/// Request text kept in a diff with `keep_text`.
const REQUEST_TEXT_LIMIT: usize = 4096;

/// Records what the copies found; the answer texts for `compare.embeddings`
/// when the policy embeds and the primary and an unperturbed shadow had text.
pub(super) fn report(job: &Job, results: Vec<CopyResult>, diffs: &MirrorDiffs) -> Option<Texts> {
    let metrics = &job.policy.metrics;
    let mut shadows = Vec::new();
    let mut noise = Vec::new();
    for (kind, result) in results {
        let verdict = result.as_ref().map_or_else(|r| *r, |_| MirrorResult::Ok);
        match kind {
            CopyKind::Shadow(n) => {
                metrics.count(verdict, 1);
                if let Ok(answer) = result {
                    shadows.push((n, answer));
                }
            }
            CopyKind::Noise(_) => {
                metrics.count_noise(verdict);
                if let Ok(answer) = result {
                    noise.push(answer);
                }
            }
            CopyKind::Embedding => {}
        }
    }
    if shadows.is_empty() {
        return None;
    }
    let embeds = job.policy.config.compare.embeddings.is_some();
    let mut texts = Vec::new();
    let primary = leg(job, &job.primary);
    let noise: Vec<Comparison> = noise
        .iter()
        .map(|a| compare(&primary, &leg(job, &a.answer)))
        .collect();
    let floor = NoiseFloor::from_noise(&noise);
    for s in noise.iter().filter_map(|c| c.similarity) {
        metrics.noise_similarity.observe(s);
    }
    shadows.sort_by_key(|(n, _)| *n);
    for (n, answer) in &shadows {
        let c = compare(&primary, &leg(job, &answer.answer));
        if answer.perturbed {
            // Reported apart: a reworded prompt is meant to move the answer,
            // so it feeds the robustness score, not the diffs.
            if let Some(s) = c.similarity {
                metrics.perturbed_similarity.observe(s);
            }
            continue;
        }
        record_figures(job, &c);
        let kinds = differences(&c, &floor, job.policy.config.compare.min_similarity);
        for kind in &kinds {
            metrics.count_diff(kind);
        }
        let kept = (!kinds.is_empty()).then(|| {
            diffs.push(diff_record(
                job, *n, kinds, &c, &noise, &floor, &primary, answer,
            ))
        });
        if embeds {
            if let Some(text) = leg(job, &answer.answer).text {
                texts.push(ShadowText {
                    copy: *n,
                    text,
                    diff: kept,
                });
            }
        }
    }
    if job.policy.config.perturb.is_some() {
        metrics.update_robustness();
    }
    match (primary.text, texts.is_empty()) {
        (Some(primary), false) => Some(Texts {
            primary,
            shadows: texts,
        }),
        _ => None,
    }
}

fn record_figures(job: &Job, c: &Comparison) {
    let m = &job.policy.metrics;
    m.compared.inc();
    if let Some(s) = c.similarity {
        m.similarity.observe(s);
    }
    if let Some(r) = c.recall {
        m.recall.observe(r);
    }
    if let Some(r) = c.latency_ratio {
        m.latency_ratio.observe(r);
    }
    if let Some(r) = c.ttft_ratio {
        m.ttft_ratio.observe(r);
    }
    if let Some(d) = c.output_token_delta {
        m.output_tokens.observe(d as f64);
    }
}

fn joined(chunks: &[Bytes]) -> Vec<u8> {
    chunks.iter().flat_map(|c| c.iter().copied()).collect()
}

/// Text for LLM shadows, ids when `compare.ids` is set; neither from a
/// body cut at the comparison limit.
fn content(job: &Job, body: &[Bytes], truncated: bool) -> (Option<String>, Option<Vec<String>>) {
    if truncated {
        return (None, None);
    }
    let bytes = joined(body);
    let text = (job.policy.shadow.config.kind == ClusterKind::Llm)
        .then(|| answer_text(&bytes))
        .flatten();
    let ids = job.policy.config.compare.ids.as_ref().map(|pointer| {
        serde_json::from_slice::<serde_json::Value>(&bytes)
            .map(|doc| ids_at(&doc, pointer))
            .unwrap_or_default()
    });
    (text, ids)
}

fn leg(job: &Job, a: &Answer) -> Leg {
    let (text, ids) = match a.grpc_status {
        // Protobuf bytes: neither text nor JSON ids.
        Some(_) => (None, None),
        None => content(job, &a.body, a.truncated),
    };
    Leg {
        status: a.status,
        latency: a.latency,
        ttft: a.ttft,
        output_tokens: a.output_tokens,
        text,
        ids,
        grpc_status: a.grpc_status,
        message: a
            .grpc_status
            .and_then(|_| unary_message(&a.body, a.truncated)),
    }
}

/// A gRPC answer of exactly one whole message (a unary call's), as its
/// fingerprint; `None` for a stream, an empty answer or a cut one.
fn unary_message(body: &[Bytes], truncated: bool) -> Option<String> {
    let mut framer = GrpcFramer::new();
    let messages: u32 = body.iter().map(|chunk| framer.feed(chunk)).sum();
    (!truncated && messages == 1 && !framer.in_message()).then(|| fingerprint(body))
}

#[allow(clippy::too_many_arguments)]
fn diff_record(
    job: &Job,
    copy: u32,
    kinds: Vec<&'static str>,
    c: &Comparison,
    noise: &[Comparison],
    floor: &NoiseFloor,
    primary: &Leg,
    answer: &CopyAnswer,
) -> DiffRecord {
    let keep = job.policy.config.compare.keep_text;
    let shadow = leg(job, &answer.answer);
    let primary_cluster = job
        .primary_cluster
        .as_ref()
        .map_or(String::new(), |c| c.config.name.clone());
    DiffRecord {
        seq: 0,
        time_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        route: job.policy.route.clone(),
        request_id: job.request_id.clone(),
        method: job.method.to_string(),
        path: job.path.split('?').next().unwrap_or("").to_string(),
        copy,
        kinds,
        similarity: c.similarity,
        embedding_similarity: None,
        recall: c.recall,
        latency_ratio: c.latency_ratio,
        ttft_ratio: c.ttft_ratio,
        output_token_delta: c.output_token_delta,
        noise_similarity: (!noise.is_empty()).then_some(floor.similarity),
        noise_recall: (!noise.is_empty()).then_some(floor.recall),
        request_bytes: job.body_len(),
        request_fingerprint: fingerprint(&job.body),
        request_text: keep.then(|| {
            let bytes = joined(&job.body);
            String::from_utf8_lossy(&bytes[..bytes.len().min(REQUEST_TEXT_LIMIT)]).into_owned()
        }),
        primary: diff_leg(
            primary_cluster,
            primary,
            &job.primary.body,
            job.primary.bytes,
            keep,
        ),
        shadow: diff_leg(
            answer.cluster.clone(),
            &shadow,
            &answer.answer.body,
            answer.answer.bytes,
            keep,
        ),
    }
}

fn diff_leg(cluster: String, leg: &Leg, body: &[Bytes], bytes: usize, keep: bool) -> DiffLeg {
    DiffLeg {
        cluster,
        status: leg.status,
        grpc_status: leg.grpc_status,
        latency_ms: leg.latency.as_secs_f64() * 1000.0,
        ttft_ms: leg.ttft.map(|t| t.as_secs_f64() * 1000.0),
        output_tokens: leg.output_tokens,
        bytes,
        fingerprint: fingerprint(body),
        ids_count: leg.ids.as_ref().map(Vec::len),
        text: leg.text.clone().filter(|_| keep),
        ids: leg.ids.clone().filter(|_| keep),
    }
}
