//! The gates that read a route's mirror (`embedding_similarity_p10_min`,
//! `embedding_drift_kl_max`, `answer_dispersion_max`): the route must
//! embed its shadow answers, mirror them to the canary, and keep enough
//! of them for `min_requests` to be reached. And `min_coverage`, which
//! reads the clusters of the route's prompts that its embedder makes.

use super::super::super::typed::*;
use super::super::Errors;

/// Checks `rollout`'s mirror gates against its route's mirror policy. A
/// route this instance does not have (a fleet controller's) is the
/// targets' business.
pub(super) fn mirror_gates(
    at: &str,
    rollout: &RolloutConfig,
    routes: &[RouteConfig],
    errs: &mut Errors,
) {
    min_coverage(at, rollout, routes, errs);
    let Some(route) = routes.iter().find(|r| r.name == rollout.route) else {
        return;
    };
    let name = &route.name;
    for (gate, _) in rollout.gates.bounds() {
        if !gate.reads_the_mirror() {
            continue;
        }
        let path = format!("{at}.gates.{gate}");
        let mirror = route.mirror.as_ref();
        let Some(embeddings) = mirror.and_then(|m| m.compare.embeddings.as_ref()) else {
            errs.push(
                path,
                format!("needs mirror.compare.embeddings on route `{name}`"),
            );
            continue;
        };
        let Some(mirror) = mirror else { continue };
        if gate == Gate::AnswerDispersionMax && !mirror.stability {
            errs.push(
                path.clone(),
                format!("needs mirror.stability on route `{name}`"),
            );
        }
        if mirror.cluster != rollout.canary {
            errs.push(
                path.clone(),
                format!(
                    "route `{name}` mirrors to cluster `{}`, not to the canary `{}`",
                    mirror.cluster, rollout.canary
                ),
            );
        }
        // Local windows hold `window` pairs (prompts) at most; Prometheus
        // counts whatever arrived in the rollout's window.
        if rollout.source.is_none() && rollout.min_requests > embeddings.window as u64 {
            let what = if gate == Gate::AnswerDispersionMax {
                "prompts"
            } else {
                "pairs"
            };
            errs.push(
                path,
                format!(
                    "min_requests {} is more than the {} {what} mirror.compare.embeddings.window keeps: the gate would never be judged",
                    rollout.min_requests, embeddings.window
                ),
            );
        }
    }
}

/// `min_coverage`: above 0, read from this instance (not in fleet mode),
/// and the route's embedder clusters its prompts.
fn min_coverage(at: &str, rollout: &RolloutConfig, routes: &[RouteConfig], errs: &mut Errors) {
    let Some((gate, bound)) = rollout
        .gates
        .bounds()
        .into_iter()
        .find(|(g, _)| *g == Gate::MinCoverage)
    else {
        return;
    };
    let path = format!("{at}.gates.{gate}");
    if bound <= 0.0 {
        errs.push(
            path.clone(),
            format!("{bound}% is not within 0 (excluded) ..= 100%: it would hold nothing"),
        );
    }
    if rollout.source.is_some() {
        errs.push(
            path,
            "is not read in fleet mode (source.prometheus): each instance clusters its own prompts",
        );
        return;
    }
    let Some(route) = routes.iter().find(|r| r.name == rollout.route) else {
        return;
    };
    let covered = route
        .mirror
        .as_ref()
        .and_then(|m| m.compare.embeddings.as_ref())
        .is_some_and(|e| e.coverage.is_some());
    if !covered {
        errs.push(
            path,
            format!(
                "needs mirror.compare.embeddings.coverage on route `{}` (its embedder clusters the prompts)",
                route.name
            ),
        );
    }
}
