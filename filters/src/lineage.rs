//! Lineage: content ids and the artefact records that link a dataset to a
//! checkpoint, a cluster version, a rollout and its events, and a scenario
//! to its runs and reports. Pure: callers store and read the records.
//!
//! An id is the first 16 hex digits of the SHA-256 of the canonical JSON
//! (object keys sorted, no spaces) of an artefact's *inputs* and its
//! parents' ids, never of timestamps or results: the same inputs give the
//! same id on any machine, and a changed parent changes every id below it.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// An artefact's content id: 16 lower-case hex digits.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ContentId(String);

impl ContentId {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Reads an id as written (16 hex digits, any case).
    pub fn parse(text: &str) -> Result<ContentId, String> {
        if text.len() == 16 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(ContentId(text.to_ascii_lowercase()))
        } else {
            Err(format!("`{text}` is not a lineage id (16 hex digits)"))
        }
    }
}

impl fmt::Display for ContentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `value` as canonical JSON: object keys sorted at every depth, no
/// whitespace, numbers and strings as serde_json writes them.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            // Sorted here, whatever order the map keeps (serde_json's
            // `preserve_order` may be on through another crate).
            let sorted: BTreeMap<&String, &Value> = map.iter().collect();
            out.push('{');
            for (i, (key, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The content id of `inputs`: SHA-256 of their canonical JSON, 16 hex digits.
pub fn content_id(inputs: &Value) -> ContentId {
    let digest = Sha256::digest(canonical_json(inputs).as_bytes());
    ContentId(hex16(&digest))
}

fn hex16(digest: &[u8]) -> String {
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// What an artefact is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactKind {
    Dataset,
    Checkpoint,
    PromptTemplate,
    Config,
    Cluster,
    Scenario,
    Model,
    LoadRun,
    CapacityRun,
    Report,
    Rollout,
    RolloutEvent,
    Feedback,
}

impl ArtifactKind {
    pub fn name(self) -> &'static str {
        match self {
            ArtifactKind::Dataset => "dataset",
            ArtifactKind::Checkpoint => "checkpoint",
            ArtifactKind::PromptTemplate => "prompt_template",
            ArtifactKind::Config => "config",
            ArtifactKind::Cluster => "cluster",
            ArtifactKind::Scenario => "scenario",
            ArtifactKind::Model => "model",
            ArtifactKind::LoadRun => "load_run",
            ArtifactKind::CapacityRun => "capacity_run",
            ArtifactKind::Report => "report",
            ArtifactKind::Rollout => "rollout",
            ArtifactKind::RolloutEvent => "rollout_event",
            ArtifactKind::Feedback => "feedback",
        }
    }
}

/// One node of the lineage DAG, as stored (one JSON file per artefact).
/// `id` covers `kind`, `inputs` and `parents`; `label` and `attrs` are for
/// people and may hold results or times, so they are outside the id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Artifact {
    pub v: u32,
    pub id: ContentId,
    pub kind: ArtifactKind,
    /// A short name: the cluster's name, the scenario's file name.
    pub label: String,
    pub parents: Vec<ContentId>,
    pub inputs: Value,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attrs: BTreeMap<String, Value>,
}

impl Artifact {
    /// An artefact of `kind` made from `inputs` and `parents` (kept sorted,
    /// so their order does not change the id).
    pub fn new(
        kind: ArtifactKind,
        label: impl Into<String>,
        inputs: Value,
        parents: Vec<ContentId>,
    ) -> Artifact {
        let mut parents = parents;
        parents.sort();
        parents.dedup();
        let id = content_id(&serde_json::json!({
            "kind": kind.name(),
            "inputs": inputs,
            "parents": parents,
        }));
        Artifact {
            v: 1,
            id,
            kind,
            label: label.into(),
            parents,
            inputs,
            attrs: BTreeMap::new(),
        }
    }

    /// The same artefact with an attribute for people (not in the id).
    pub fn with_attr(mut self, key: &str, value: Value) -> Artifact {
        self.attrs.insert(key.to_owned(), value);
        self
    }
}

/// `uri@version`, as a cluster's lineage names a dataset, a checkpoint or a
/// prompt template: `s3://bucket/ds@v3`, `hf://org/model@3f2a…`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct VersionedUri {
    pub uri: String,
    pub version: String,
}

impl FromStr for VersionedUri {
    type Err = String;

    /// Splits at the last `@`, so a uri with a user part
    /// (`ssh://git@host/repo@abc`) keeps it.
    fn from_str(text: &str) -> Result<VersionedUri, String> {
        match text.rsplit_once('@') {
            Some((uri, version)) if !uri.is_empty() && !version.is_empty() => Ok(VersionedUri {
                uri: uri.to_owned(),
                version: version.to_owned(),
            }),
            Some(_) => Err(format!(
                "`{text}` needs a uri and a version on each side of `@`: write uri@version"
            )),
            None => Err(format!("`{text}` has no `@`: write uri@version")),
        }
    }
}

impl fmt::Display for VersionedUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.uri, self.version)
    }
}

/// Where a cluster's model came from: `clusters[].lineage`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelLineage {
    pub dataset: Option<VersionedUri>,
    pub checkpoint: Option<VersionedUri>,
    pub prompt_template: Option<VersionedUri>,
    pub api_version: Option<String>,
}

impl ModelLineage {
    /// The artefacts the lineage names, parents first: the dataset, then the
    /// checkpoint (the dataset's child), then the prompt template. The
    /// cluster's parents are the last checkpoint-or-dataset and the template.
    pub fn artifacts(&self) -> (Vec<Artifact>, Vec<ContentId>) {
        let mut made = Vec::new();
        let mut cluster_parents = Vec::new();
        let dataset = self.dataset.as_ref().map(|d| {
            Artifact::new(
                ArtifactKind::Dataset,
                d.to_string(),
                serde_json::json!({"uri": d.uri, "version": d.version}),
                Vec::new(),
            )
        });
        let checkpoint = self.checkpoint.as_ref().map(|c| {
            let parents = dataset.iter().map(|d| d.id.clone()).collect();
            Artifact::new(
                ArtifactKind::Checkpoint,
                c.to_string(),
                serde_json::json!({"uri": c.uri, "version": c.version}),
                parents,
            )
        });
        match (&dataset, &checkpoint) {
            (_, Some(c)) => cluster_parents.push(c.id.clone()),
            (Some(d), None) => cluster_parents.push(d.id.clone()),
            (None, None) => {}
        }
        made.extend(dataset);
        made.extend(checkpoint);
        if let Some(t) = &self.prompt_template {
            let template = Artifact::new(
                ArtifactKind::PromptTemplate,
                t.to_string(),
                serde_json::json!({"uri": t.uri, "version": t.version}),
                Vec::new(),
            );
            cluster_parents.push(template.id.clone());
            made.push(template);
        }
        (made, cluster_parents)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_and_whitespace_do_not_change_the_id() {
        let a: Value = serde_json::from_str(r#"{"b": [1, {"y": 2, "x": 1}], "a": "s"}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":"s","b":[1,{"x":1,"y":2}]}"#).unwrap();
        assert_eq!(canonical_json(&a), r#"{"a":"s","b":[1,{"x":1,"y":2}]}"#);
        assert_eq!(content_id(&a), content_id(&b));
        assert_eq!(content_id(&a).as_str().len(), 16);
    }

    #[test]
    fn the_id_is_the_sha256_of_the_canonical_json() {
        // sha256("{}") = 44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a
        assert_eq!(content_id(&json!({})).as_str(), "44136fa355b3678a");
        assert_ne!(content_id(&json!({"a": 1})), content_id(&json!({"a": 2})));
    }

    #[test]
    fn array_order_matters_but_parent_order_does_not() {
        assert_ne!(content_id(&json!([1, 2])), content_id(&json!([2, 1])));
        let (p, q) = (content_id(&json!(1)), content_id(&json!(2)));
        let one = Artifact::new(
            ArtifactKind::Report,
            "r",
            json!({}),
            vec![p.clone(), q.clone()],
        );
        let two = Artifact::new(ArtifactKind::Report, "r", json!({}), vec![q, p]);
        assert_eq!(one.id, two.id);
        // The kind is an input: a report and a run of the same inputs differ.
        let run = Artifact::new(ArtifactKind::LoadRun, "r", json!({}), one.parents.clone());
        assert_ne!(one.id, run.id);
    }

    #[test]
    fn labels_and_attrs_are_not_in_the_id() {
        let a = Artifact::new(ArtifactKind::LoadRun, "a", json!({"seed": 1}), vec![]);
        let b = Artifact::new(ArtifactKind::LoadRun, "b", json!({"seed": 1}), vec![])
            .with_attr("finished", json!("2026-12-06T08:00:00Z"));
        assert_eq!(a.id, b.id);
    }

    #[test]
    fn an_artifact_round_trips_through_json() {
        let a = Artifact::new(
            ArtifactKind::Cluster,
            "llm-canary",
            json!({"v": "2"}),
            vec![],
        )
        .with_attr("version", json!("2.0.0"));
        let text = serde_json::to_string(&a).unwrap();
        assert!(text.contains(r#""kind":"cluster""#), "{text}");
        let back: Artifact = serde_json::from_str(&text).unwrap();
        assert_eq!(back, a);
    }

    #[test]
    fn versioned_uris_need_an_at() {
        let u: VersionedUri = "s3://data/chat@v3".parse().unwrap();
        assert_eq!(
            (u.uri.as_str(), u.version.as_str()),
            ("s3://data/chat", "v3")
        );
        let git: VersionedUri = "ssh://git@host/ckpt@3f2a".parse().unwrap();
        assert_eq!(git.uri, "ssh://git@host/ckpt");
        assert_eq!(
            "s3://data/chat".parse::<VersionedUri>().unwrap_err(),
            "`s3://data/chat` has no `@`: write uri@version"
        );
        assert_eq!(
            "s3://x@".parse::<VersionedUri>().unwrap_err(),
            "`s3://x@` needs a uri and a version on each side of `@`: write uri@version"
        );
    }

    #[test]
    fn a_model_lineage_chains_dataset_to_checkpoint() {
        let lineage = ModelLineage {
            dataset: Some("s3://d@1".parse().unwrap()),
            checkpoint: Some("s3://c@abc".parse().unwrap()),
            prompt_template: Some("git://t@7".parse().unwrap()),
            api_version: Some("3.2.1".into()),
        };
        let (made, parents) = lineage.artifacts();
        let kinds: Vec<_> = made.iter().map(|a| a.kind).collect();
        assert_eq!(
            kinds,
            [
                ArtifactKind::Dataset,
                ArtifactKind::Checkpoint,
                ArtifactKind::PromptTemplate
            ]
        );
        assert_eq!(made[1].parents, vec![made[0].id.clone()]);
        let mut want = vec![made[1].id.clone(), made[2].id.clone()];
        want.sort();
        let mut got = parents;
        got.sort();
        assert_eq!(got, want);
        // A new dataset changes the checkpoint's id too.
        let retrained = ModelLineage {
            dataset: Some("s3://d@2".parse().unwrap()),
            ..lineage
        };
        assert_ne!(retrained.artifacts().0[1].id, made[1].id);
    }

    #[test]
    fn ids_parse_as_sixteen_hex_digits() {
        assert_eq!(
            ContentId::parse("44136FA355B3678A").unwrap().as_str(),
            "44136fa355b3678a"
        );
        assert_eq!(
            ContentId::parse("xyz").unwrap_err(),
            "`xyz` is not a lineage id (16 hex digits)"
        );
    }
}
