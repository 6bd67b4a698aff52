//! Real Chroma vector stores as primary and shadow: the shadow holds the
//! same collection with part of its vectors changed, and the mirror reports
//! recall@k below 1 for the queries that reach the changed part and 1 for
//! the rest.

use std::path::Path;

use std::time::Duration;

use serde_json::{json, Value};

use super::real::sample;
use crate::harness::{listener, metrics_when, Admin};
use crate::support::{chroma_bin, require, Chroma, TempDir};

const GROUPS: usize = 5;
const PER_GROUP: usize = 4;
const COLLECTIONS: &str = "/api/v2/tenants/default_tenant/databases/default_database/collections";

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The centre of group `g`: far from every other group's.
fn centre(g: usize) -> Vec<f64> {
    (0..GROUPS)
        .map(|d| if d == g { 10.0 } else { 0.0 })
        .collect()
}

fn doc_id(g: usize, k: usize) -> String {
    format!("g{g}-d{k}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chroma_shadow_with_changed_vectors_has_recall_below_1_only_where_they_changed() {
    let Some(bin) = chroma_bin() else {
        require("chroma (pip chromadb in .venv)", false);
        return;
    };
    let (a_dir, b_dir) = (
        TempDir::new("chroma-primary"),
        TempDir::new("chroma-shadow"),
    );
    let seed = Chroma::start(&bin, a_dir.path()).await;
    let created = seed
        .post(
            COLLECTIONS,
            json!({"name": "docs", "metadata": {"hnsw:space": "l2", "hnsw:search_ef": 100}}),
        )
        .await;
    let id = created["id"].as_str().unwrap().to_string();
    seed.stop();
    // The shadow starts as a copy of the empty collection (so it has the
    // same id), then each store is filled on its own: the shadow's group 0
    // lies far away. Adding rather than updating keeps Chroma's HNSW index
    // free of replaced nodes, whose approximate search once gave a second
    // query a recall below 1 in CI.
    copy_dir(a_dir.path(), b_dir.path());
    let primary = Chroma::start(&bin, a_dir.path()).await;
    let shadow = Chroma::start(&bin, b_dir.path()).await;
    let ids: Vec<String> = (0..GROUPS)
        .flat_map(|g| (0..PER_GROUP).map(move |k| doc_id(g, k)))
        .collect();
    let vectors = |moved: bool| -> Vec<Vec<f64>> {
        (0..GROUPS)
            .flat_map(|g| (0..PER_GROUP).map(move |k| (g, k)))
            .map(|(g, k)| {
                if moved && g == 0 {
                    return vec![-50.0 - k as f64; GROUPS];
                }
                let mut v = centre(g);
                v[(g + 1) % GROUPS] += 0.1 * k as f64;
                v
            })
            .collect()
    };
    for (store, moved) in [(&primary, false), (&shadow, true)] {
        store
            .post(
                &format!("{COLLECTIONS}/{id}/add"),
                json!({"ids": ids, "embeddings": vectors(moved)}),
            )
            .await;
    }

    let sluice = super::head()
        .cluster(
            "chroma-a",
            "vector",
            [format!("127.0.0.1:{}", primary.port)],
        )
        .cluster("chroma-b", "vector", [format!("127.0.0.1:{}", shadow.port)])
        .route_with(
            "chat",
            "chroma-a: 100",
            "mirror: { cluster: chroma-b, compare: { ids: /ids/0/* } }",
        )
        .start();
    let query = format!(
        "http://{}{COLLECTIONS}/{id}/query",
        listener(&sluice, "public")
    );
    let client = reqwest::Client::new();
    for g in 0..GROUPS {
        let r = client
            .post(&query)
            .header("x-request-id", format!("query-{g}"))
            .json(&json!({"query_embeddings": [centre(g)], "n_results": PER_GROUP, "include": ["distances"]}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let answer: Value = r.json().await.unwrap();
        let mut got: Vec<String> = answer["ids"][0]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        got.sort();
        let want: Vec<String> = (0..PER_GROUP).map(|k| doc_id(g, k)).collect();
        assert_eq!(got, want, "the primary answers from its own data");
    }

    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let metrics = loop {
        let text = metrics_when(&sluice, |_| true).await;
        let done = sample(&text, "sluice_mirror_diff_compared_total{route=\"chat\"} ");
        if done >= GROUPS as f64 || std::time::Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        sample(&metrics, "sluice_mirror_diff_recall_count{route=\"chat\"} "),
        GROUPS as f64,
        "{metrics}"
    );
    // One query (group 0) below 1; the other four at exactly 1.
    assert_eq!(
        sample(
            &metrics,
            "sluice_mirror_diff_recall_bucket{route=\"chat\",le=\"0.99\"} "
        ),
        1.0
    );
    assert_eq!(
        sample(
            &metrics,
            "sluice_mirror_diff_total{kind=\"ids\",route=\"chat\"} "
        ),
        1.0
    );
    let (_, diffs) = Admin::new(&sluice).get("/v1/mirror/diffs").await;
    let list = diffs["diffs"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{diffs}");
    assert_eq!(list[0]["request_id"], "query-0");
    assert_eq!(list[0]["kinds"], json!(["ids"]));
    assert!(list[0]["recall"].as_f64().unwrap() < 1.0);
    assert_eq!(list[0]["primary"]["ids_count"], PER_GROUP);
    // Redacted: no ids or text without keep_text.
    assert!(list[0]["primary"].get("ids").is_none());
}
