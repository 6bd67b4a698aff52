//! `clusters[].lineage`: where a cluster's model came from.

use super::*;
use sluice_filters::{ModelLineage, VersionedUri};

fn uri(text: &str) -> Option<VersionedUri> {
    Some(text.parse().unwrap())
}

#[test]
fn a_cluster_reads_its_lineage() {
    let c = Config::from_yaml(&GOOD.replacen(
        "version: v2,",
        "version: v2, lineage: { dataset: s3://data/chat@v3, checkpoint: hf://org/llama@3f2a, \
         prompt_template: git://prompts/chat@9c1, api_version: 3.2.1 },",
        1,
    ))
    .unwrap();
    assert_eq!(
        c.clusters[1].lineage,
        ModelLineage {
            dataset: uri("s3://data/chat@v3"),
            checkpoint: uri("hf://org/llama@3f2a"),
            prompt_template: uri("git://prompts/chat@9c1"),
            api_version: Some("3.2.1".into()),
        }
    );
    assert_eq!(c.clusters[0].lineage, ModelLineage::default());
}

#[test]
fn a_lineage_uri_without_an_at_is_an_error_at_its_path() {
    assert_eq!(
        errors_of(
            "version: v2,",
            "version: v2, lineage: { dataset: s3://data/chat, checkpoint: \"@abc\" },"
        ),
        [
            "clusters[1].lineage.dataset: `s3://data/chat` has no `@`: write uri@version",
            "clusters[1].lineage.checkpoint: `@abc` needs a uri and a version on each side of \
             `@`: write uri@version",
        ]
    );
    assert_eq!(
        errors_of("version: v2,", "version: v2, lineage: { model: x@1 },"),
        [
            "clusters[1].lineage.model: unknown field `model`, expected one of `dataset`, \
          `checkpoint`, `prompt_template`, `api_version` at line 10 column 60"
        ]
    );
}
