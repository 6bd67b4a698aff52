//! The lineage artefacts of what the control plane owns: a cluster version
//! (below its dataset, checkpoint and prompt template), a rollout (below its
//! two clusters) and each of its events (below the rollout). Their inputs
//! are what defines them, never what they measured or when, so the same
//! config gives the same ids on every instance and every run.

use serde_json::{json, Value};
use sluice_filters::{format_duration, Artifact, ArtifactKind, ContentId};

use crate::config::{ClusterConfig, ClusterKind, Config, OnBreach, RolloutConfig};
use crate::rollout::{EventLineage, RolloutEvent};

/// The config as an artefact: its raw form as canonical JSON, below the
/// cluster versions it holds. Any change (a split moved by a rollout
/// included) makes a new config id; the clusters' ids stay.
pub fn config_artifact(config: &Config) -> Artifact {
    let inputs = serde_json::to_value(&config.raw).unwrap_or(Value::Null);
    let parents = config.clusters.iter().map(cluster_id).collect();
    Artifact::new(ArtifactKind::Config, "config", inputs, parents)
}

/// Every cluster of `config` with what its lineage names, and the config,
/// without repeats (two clusters may share a dataset).
pub fn config_artifacts(config: &Config) -> Vec<Artifact> {
    let mut made: Vec<Artifact> = Vec::new();
    for c in &config.clusters {
        for a in cluster_artifacts(c) {
            if !made.iter().any(|m| m.id == a.id) {
                made.push(a);
            }
        }
    }
    made.push(config_artifact(config));
    made
}

/// The rollout `rollout` as an artefact below the versions its clusters
/// have in `config`; `None` when either cluster is gone from it.
pub fn rollout_in(config: &Config, rollout: &RolloutConfig) -> Option<Artifact> {
    let find = |name: &str| config.clusters.iter().find(|c| c.name == name);
    let (stable, canary) = (find(&rollout.stable)?, find(&rollout.canary)?);
    Some(rollout_artifact(
        rollout,
        cluster_id(stable),
        cluster_id(canary),
    ))
}

/// A cluster version and the artefacts its lineage names, parents first;
/// the cluster is the last.
pub fn cluster_artifacts(cluster: &ClusterConfig) -> Vec<Artifact> {
    let (mut made, parents) = cluster.lineage.artifacts();
    made.push(cluster_node(cluster, parents));
    made
}

/// The id of a cluster version.
pub fn cluster_id(cluster: &ClusterConfig) -> ContentId {
    let (_, parents) = cluster.lineage.artifacts();
    cluster_node(cluster, parents).id
}

fn cluster_node(cluster: &ClusterConfig, parents: Vec<ContentId>) -> Artifact {
    let inputs = json!({
        "name": cluster.name,
        "kind": kind_name(cluster.kind),
        "version": cluster.version,
        "api_version": cluster.lineage.api_version,
    });
    Artifact::new(ArtifactKind::Cluster, cluster.name.clone(), inputs, parents)
}

fn kind_name(kind: ClusterKind) -> &'static str {
    match kind {
        ClusterKind::Llm => "llm",
        ClusterKind::Vector => "vector",
        ClusterKind::Cache => "cache",
        ClusterKind::Http => "http",
    }
}

/// A rollout: what it releases and how (route, clusters, steps, holds,
/// gates), below the two cluster versions. `stable` and `canary` are the
/// clusters' ids. Fleet targets and the Prometheus source say where it
/// runs, not what it releases, and are left out.
pub fn rollout_artifact(rollout: &RolloutConfig, stable: ContentId, canary: ContentId) -> Artifact {
    let gates: Vec<Value> = rollout
        .gates
        .bounds()
        .into_iter()
        .map(|(gate, bound)| json!([gate.as_str(), bound]))
        .collect();
    let inputs = json!({
        "name": rollout.name,
        "route": rollout.route,
        "stable": rollout.stable,
        "canary": rollout.canary,
        "steps": rollout.steps,
        "hold": format_duration(rollout.hold),
        "min_requests": rollout.min_requests,
        "window": format_duration(rollout.window),
        "consecutive": rollout.consecutive,
        "on_breach": match rollout.on_breach {
            OnBreach::Rollback => "rollback",
            OnBreach::Pause => "pause",
        },
        "gates": gates,
        "exclude_load": rollout.gates.exclude_load,
    });
    Artifact::new(
        ArtifactKind::Rollout,
        rollout.name.clone(),
        inputs,
        vec![stable, canary],
    )
}

/// The `seq`-th event (0-based, oldest first) of the rollout `rollout`:
/// the transition and where it left the canary. Its reason and evidence
/// are readings, kept as attributes outside the id.
pub fn event_artifact(rollout: &ContentId, seq: usize, event: &RolloutEvent) -> Artifact {
    let inputs = json!({
        "seq": seq,
        "from": event.from.as_str(),
        "to": event.to.as_str(),
        "step": event.step,
        "weight": event.weight,
    });
    let label = format!("{} → {}", event.from.as_str(), event.to.as_str());
    Artifact::new(
        ArtifactKind::RolloutEvent,
        label,
        inputs,
        vec![rollout.clone()],
    )
    .with_attr("reason", Value::String(event.reason.clone()))
    .with_attr("time_ms", json!(event.time_ms))
}

/// The lineage of `event`, the `seq`-th of `rollout` (as configured now),
/// whose clusters are read in `config`; `None` when one is gone from it.
pub(crate) fn event_lineage(
    config: &Config,
    rollout: &RolloutConfig,
    seq: usize,
    event: &RolloutEvent,
) -> Option<EventLineage> {
    let parent = rollout_in(config, rollout)?.id;
    Some(EventLineage {
        id: event_artifact(&parent, seq, event).id,
        rollout: parent,
        seq,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::config::Config;
    use crate::rollout::State;

    const CONFIG: &str = "
listeners: [{ name: public, listen: 127.0.0.1:0, protocol: http }]
clusters:
  - { name: llm-stable, kind: llm, version: v1.4.2, endpoints: [127.0.0.1:9] }
  - { name: llm-canary, kind: llm, version: v2.0.0, endpoints: [127.0.0.1:9],
      lineage: { dataset: s3://data/chat@v3, checkpoint: hf://org/llama@3f2a, api_version: 3.2.1 } }
routes:
  - { name: chat, listener: public, match: { path_prefix: / }, split: { llm-stable: 100, llm-canary: 0 } }
rollouts:
  - { name: chat-v2, route: chat, stable: llm-stable, canary: llm-canary, steps: [5, 100],
      gates: { error_rate: 1% } }
";

    fn config(text: &str) -> Config {
        Config::from_yaml(text).unwrap()
    }

    #[test]
    fn the_same_config_gives_the_same_ids_and_a_changed_checkpoint_changes_them() {
        let a = config(CONFIG);
        let b = config(CONFIG);
        let canary = cluster_artifacts(&a.clusters[1]);
        let kinds: Vec<_> = canary.iter().map(|x| x.kind).collect();
        assert_eq!(
            kinds,
            [
                ArtifactKind::Dataset,
                ArtifactKind::Checkpoint,
                ArtifactKind::Cluster
            ]
        );
        assert_eq!(canary[2].parents, vec![canary[1].id.clone()]);
        assert_eq!(cluster_id(&a.clusters[1]), canary[2].id);
        assert_eq!(cluster_id(&a.clusters[1]), cluster_id(&b.clusters[1]));
        assert_ne!(cluster_id(&a.clusters[0]), cluster_id(&a.clusters[1]));

        let retrained = config(&CONFIG.replace("llama@3f2a", "llama@9e1b"));
        assert_ne!(
            cluster_id(&retrained.clusters[1]),
            cluster_id(&a.clusters[1])
        );
        // Endpoints are where it runs, not what it is.
        let moved = config(&CONFIG.replace(
            "v2.0.0, endpoints: [127.0.0.1:9]",
            "v2.0.0, endpoints: [127.0.0.2:9]",
        ));
        assert_eq!(cluster_id(&moved.clusters[1]), cluster_id(&a.clusters[1]));
    }

    #[test]
    fn a_rollout_sits_below_its_clusters_and_its_events_below_it() {
        let c = config(CONFIG);
        let (stable, canary) = (cluster_id(&c.clusters[0]), cluster_id(&c.clusters[1]));
        let rollout = rollout_artifact(&c.rollouts[0], stable.clone(), canary.clone());
        let mut want = vec![stable.clone(), canary.clone()];
        want.sort();
        assert_eq!(rollout.parents, want);
        let other = config(&CONFIG.replace("steps: [5, 100]", "steps: [20, 100]"));
        assert_ne!(
            rollout_artifact(&other.rollouts[0], stable, canary).id,
            rollout.id
        );

        let event = RolloutEvent {
            at_ms: 10,
            time_ms: 1_700_000_000_000,
            from: State::Progressing,
            to: State::RolledBack,
            step: 2,
            weight: 0,
            reason: "ttft_p95 900ms > 800ms".into(),
            evidence: Vec::new(),
            lineage: None,
        };
        let a = event_artifact(&rollout.id, 3, &event);
        assert_eq!(a.parents, vec![rollout.id.clone()]);
        // Another run's event at another time, with another reading: the same id.
        let later = RolloutEvent {
            at_ms: 99,
            time_ms: 1_800_000_000_000,
            reason: "ttft_p95 950ms > 800ms".into(),
            ..event.clone()
        };
        assert_eq!(event_artifact(&rollout.id, 3, &later).id, a.id);
        assert_ne!(event_artifact(&rollout.id, 4, &event).id, a.id);
    }

    #[test]
    fn the_config_sits_below_its_clusters_and_a_split_change_moves_only_it() {
        let a = config(CONFIG);
        let made = config_artifacts(&a);
        let kinds: Vec<_> = made.iter().map(|x| x.kind).collect();
        assert_eq!(
            kinds,
            [
                ArtifactKind::Cluster,
                ArtifactKind::Dataset,
                ArtifactKind::Checkpoint,
                ArtifactKind::Cluster,
                ArtifactKind::Config
            ]
        );
        let mut clusters = vec![cluster_id(&a.clusters[0]), cluster_id(&a.clusters[1])];
        clusters.sort();
        assert_eq!(made[4].parents, clusters);
        let moved = config(&CONFIG.replace(
            "llm-stable: 100, llm-canary: 0",
            "llm-stable: 50, llm-canary: 50",
        ));
        assert_ne!(config_artifact(&moved).id, made[4].id);
        assert_eq!(config_artifact(&config(CONFIG)).id, made[4].id);
        assert_eq!(cluster_id(&moved.clusters[1]), cluster_id(&a.clusters[1]));
    }

    #[test]
    fn an_event_is_placed_below_the_rollout_its_clusters_make_now() {
        let c = config(CONFIG);
        let event = RolloutEvent {
            at_ms: 0,
            time_ms: 1,
            from: State::Pending,
            to: State::Progressing,
            step: 1,
            weight: 5,
            reason: "started".into(),
            evidence: Vec::new(),
            lineage: None,
        };
        let rollout = rollout_in(&c, &c.rollouts[0]).unwrap();
        let placed = event_lineage(&c, &c.rollouts[0], 0, &event).unwrap();
        assert_eq!(placed.rollout, rollout.id);
        assert_eq!(placed.seq, 0);
        assert_eq!(placed.id, event_artifact(&rollout.id, 0, &event).id);
        // Without its canary in the config, a rollout has no id to sit below.
        let mut gone = c.rollouts[0].clone();
        gone.canary = "nope".into();
        assert_eq!(event_lineage(&c, &gone, 0, &event), None);
    }
}
