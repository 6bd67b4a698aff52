//! `plans:` (the rules, over the built-in ones) and `plan: auto` on a
//! rollout: its steps, hold and gates made from the change between its
//! stable and canary clusters (versions, checkpoint, prompt template).

use sluice_filters::{default_bound, plan, ClassRule, Gate, PlanInput, PlanRules, Side};

use super::super::raw::{RawClassRule, RawPlans, RawRollout};
use super::super::typed::*;
use super::Errors;

/// The rules `plans:` sets, the built-in ones where it is silent.
pub(super) fn rules(raw: Option<&RawPlans>, errs: &mut Errors) -> PlanRules {
    let mut rules = PlanRules::default();
    let Some(raw) = raw else {
        return rules;
    };
    for (name, written, rule) in [
        ("major", &raw.major, &mut rules.major),
        ("minor", &raw.minor, &mut rules.minor),
        ("patch", &raw.patch, &mut rules.patch),
    ] {
        if let Some(written) = written {
            class(&format!("plans.{name}"), written, rule, errs);
        }
    }
    if let Some(rps) = errs.positive("plans.high_traffic_rps".into(), raw.high_traffic_rps) {
        rules.high_traffic_rps = rps;
    }
    if let Some(p) = errs.percent(
        "plans.prompt_spread_change".into(),
        raw.prompt_spread_change.as_ref(),
    ) {
        rules.prompt_spread_change = p / 100.0;
    }
    rules
}

fn class(at: &str, raw: &RawClassRule, rule: &mut ClassRule, errs: &mut Errors) {
    if raw.steps.is_some() {
        rule.steps = super::rollout::steps(at, raw.steps.as_deref(), errs);
    }
    rule.hold = errs.duration(format!("{at}.hold"), raw.hold.as_deref(), rule.hold);
    if let Some(names) = &raw.gates {
        rule.gates = names
            .iter()
            .enumerate()
            .filter_map(|(i, name)| {
                Gate::parse(name)
                    .map_err(|e| errs.push(format!("{at}.gates[{i}]"), e.to_string()))
                    .ok()
            })
            .collect();
    }
    rule.capacity_run = raw.capacity_run.unwrap_or(rule.capacity_run);
    rule.throughput_check = raw.throughput_check.unwrap_or(rule.throughput_check);
}

/// Sets `rollout`'s steps, hold and gates from its plan. The rollout's own
/// gate bounds apply to the gates the plan judges; a gate the plan judges
/// that the rollout does not bound gets [`default_bound`] or is left out;
/// a gate the rollout bounds that the plan does not judge is left out too
/// (the plan says so in its reasons).
pub(super) fn auto(
    at: &str,
    raw: &RawRollout,
    rollout: &mut RolloutConfig,
    known: &[ClusterConfig],
    rules: &PlanRules,
    errs: &mut Errors,
) {
    for (field, set) in [("steps", raw.steps.is_some()), ("hold", raw.hold.is_some())] {
        if set {
            errs.push(
                format!("{at}.{field}"),
                "set by `plan: auto`: remove one of them",
            );
        }
    }
    let find = |name: &str| known.iter().find(|c| c.name == name);
    let (Some(stable), Some(canary)) = (find(&raw.stable), find(&raw.canary)) else {
        errs.push(
            format!("{at}.plan"),
            format!(
                "`auto` reads the versions of clusters `{}` and `{}`, which this config must list",
                raw.stable, raw.canary
            ),
        );
        return;
    };
    let input = PlanInput {
        from: Side {
            version: &stable.version,
            lineage: &stable.lineage,
        },
        to: Side {
            version: &canary.version,
            lineage: &canary.lineage,
        },
        // Both are unknown while the config is read: the busy-route gate
        // is judged by the rate as it comes, and a changed template gets
        // its input-length stage (run by `sluice plan --run`).
        route_rps: None,
        prompt_spread: None,
    };
    let mut plan = match plan(&input, rules) {
        Ok(p) => p,
        Err(e) => {
            errs.push(format!("{at}.plan"), e);
            return;
        }
    };
    let written = rollout.gates.bounds();
    let mut gates = Vec::new();
    for &gate in &plan.gates {
        match written.iter().find(|(g, _)| *g == gate) {
            Some(&(_, bound)) => gates.push((gate, bound)),
            None => match default_bound(gate) {
                Some(bound) => gates.push((gate, bound)),
                None => plan.reasons.push(sluice_filters::Reason {
                    part: format!("gates.{gate}"),
                    rule: plan.change.as_str().into(),
                    why: "not judged: the rollout sets no bound for it".into(),
                }),
            },
        }
    }
    for (gate, _) in written.iter().filter(|(g, _)| !plan.gates.contains(g)) {
        plan.reasons.push(sluice_filters::Reason {
            part: format!("gates.{gate}"),
            rule: plan.change.as_str().into(),
            why: format!(
                "not judged: a {} change judges only the plan's gates",
                plan.change.as_str()
            ),
        });
    }
    let mut planned: Gates = gates.into_iter().collect();
    planned.grpc_failures = rollout.gates.grpc_failures;
    rollout.gates = if rollout.gates.exclude_load {
        planned.excluding_load()
    } else {
        planned
    };
    rollout.steps = plan.steps.clone();
    rollout.hold = plan.hold;
    rollout.p99_vs_stable_above_rps = plan.p99_vs_stable_above_rps;
    rollout.plan = Some(plan);
}
