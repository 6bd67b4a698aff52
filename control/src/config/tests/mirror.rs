use std::time::Duration;

use super::*;

/// GOOD with a shadow cluster, a tls cluster, and `mirror` on the route.
fn config(mirror: &str) -> String {
    let clusters = "  - { name: redis, kind: cache, endpoints: [127.0.0.1:6379] }\n  \
- { name: shadow, kind: llm, endpoints: [127.0.0.1:8100] }\n  \
- { name: tls-shadow, kind: llm, endpoints: [127.0.0.1:9443], tls: {} }\n";
    format!(
        "{}    mirror: {mirror}\n",
        GOOD.replace(
            "  - { name: redis, kind: cache, endpoints: [127.0.0.1:6379] }\n",
            clusters
        )
    )
}

#[test]
fn defaults_and_every_key() {
    let c = Config::from_yaml(&config("{ cluster: shadow }")).unwrap();
    let m = c.routes[0].mirror.clone().unwrap();
    assert_eq!(m.percent, 100.0);
    assert_eq!(m.copies, 1.0);
    assert_eq!(m.max_body, 1024 * 1024);
    assert_eq!(m.rate_limit, None);
    assert_eq!(m.max_in_flight, 64);
    assert_eq!(m.timeout, Duration::from_secs(30));
    assert_eq!(m.compare, CompareConfig::default());

    let c = Config::from_yaml(&config(
        "{ cluster: shadow, percent: 10%, copies: 2.5, max_body: 512KiB, rate_limit: 100, \
max_in_flight: 8, sample_by: X-Session-Id, timeout: 2s, \
rewrite: { headers: { X-Env: shadow }, model: small-v2 }, \
compare: { ids: /results/*/id, noise_copies: 1, keep_text: true, min_similarity: 0.8 } }",
    ))
    .unwrap();
    let m = c.routes[0].mirror.clone().unwrap();
    assert_eq!(m.percent, 10.0);
    assert_eq!(m.copies, 2.5);
    assert_eq!(m.max_body, 512 * 1024);
    assert_eq!(m.rate_limit, Some(100.0));
    assert_eq!(m.max_in_flight, 8);
    assert_eq!(m.sample_by.as_deref(), Some("x-session-id"));
    assert_eq!(m.timeout, Duration::from_secs(2));
    assert_eq!(m.rewrite_headers, vec![("x-env".into(), "shadow".into())]);
    assert_eq!(m.rewrite_model.as_deref(), Some("small-v2"));
    assert_eq!(
        m.compare,
        CompareConfig {
            ids: Some("/results/*/id".into()),
            noise_copies: 1,
            keep_text: true,
            min_similarity: 0.8,
            embeddings: None,
        }
    );
}

#[test]
fn every_error_with_its_path() {
    let errors = errors_in(&config(
        "{ cluster: nowhere, percent: 120, copies: 0, max_body: 1 parsec, rate_limit: -1, \
max_in_flight: 0, sample_by: 'bad header', timeout: 0s, \
rewrite: { headers: { x-sluice-shadow: '1' }, model: '' }, \
compare: { ids: results, noise_copies: 9, min_similarity: 2 } }",
    ));
    assert_eq!(
        errors,
        vec![
            "routes[0].mirror.cluster: unknown cluster `nowhere`",
            "routes[0].mirror.compare.noise_copies: 9 is over the limit of 4",
            "routes[0].mirror.compare.ids: `results` is not a JSON pointer (it must start with `/`)",
            "routes[0].mirror.compare.min_similarity: 2 is not within 0..=1",
            "routes[0].mirror.rewrite.headers.x-sluice-shadow: `x-sluice-shadow` is set by the mirror itself",
            "routes[0].mirror.rewrite.model: must not be empty",
            "routes[0].mirror.percent: 120 is not within 0..=100",
            "routes[0].mirror.copies: 0 is not within 0 (excluded) ..= 16",
            "routes[0].mirror.max_body: `1 parsec` has unknown unit `parsec` (use B, KiB, MiB, GiB, KB, MB or GB)",
            "routes[0].mirror.rate_limit: must be greater than 0, found -1",
            "routes[0].mirror.max_in_flight: must be at least 1",
            "routes[0].mirror.sample_by: `bad header` is not a valid header name",
            "routes[0].mirror.timeout: must be greater than 0",
        ]
    );
}

#[test]
fn shadow_cluster_must_speak_plain_http() {
    assert_eq!(
        errors_in(&config("{ cluster: redis }")),
        vec!["routes[0].mirror.cluster: cluster `redis` is kind cache; only HTTP can be mirrored"]
    );
    assert_eq!(
        errors_in(&config("{ cluster: tls-shadow }")),
        vec!["routes[0].mirror.cluster: cluster `tls-shadow` uses tls; mirror copies are sent over plain HTTP only"]
    );
}

#[test]
fn unknown_keys_are_refused_with_their_path() {
    let errors = errors_in(&config("{ cluster: shadow, percnt: 5 }"));
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].starts_with(
            "routes[0].mirror.percnt: unknown field `percnt`, expected one of `cluster`, `percent`"
        ),
        "{errors:?}"
    );
}

#[test]
fn perturb_defaults_and_errors() {
    let c = Config::from_yaml(&config("{ cluster: shadow, perturb: { rate: 0.15 } }")).unwrap();
    let p = c.routes[0].mirror.clone().unwrap().perturb.unwrap();
    assert_eq!(
        p,
        sluice_filters::Perturbation {
            rate: 0.15,
            mode: sluice_filters::PerturbMode::Mask,
            seed: 0,
            mask_token: "[MASK]".into(),
        }
    );
    let c = Config::from_yaml(&config(
        "{ cluster: shadow, perturb: { rate: 1, mode: swap, seed: 9, mask_token: '<unk>' } }",
    ))
    .unwrap();
    let p = c.routes[0].mirror.clone().unwrap().perturb.unwrap();
    assert_eq!((p.mode, p.seed), (sluice_filters::PerturbMode::Swap, 9));

    let errors = errors_in(&config(
        "{ cluster: shadow, perturb: { rate: 1.5, mask_token: '' }, \
rewrite: { headers: { X-Sluice-Perturbed: '1' } } }",
    ));
    assert_eq!(
        errors,
        vec![
            "routes[0].mirror.rewrite.headers.X-Sluice-Perturbed: `x-sluice-perturbed` is set by the mirror itself",
            "routes[0].mirror.perturb.rate: 1.5 is not within 0 (excluded) ..= 1",
            "routes[0].mirror.perturb.mask_token: must not be empty",
        ]
    );
    let errors = errors_in(&config("{ cluster: redis, perturb: { rate: 0.2 } }"));
    assert!(
        errors.contains(
            &"routes[0].mirror.cluster: cluster `redis` is kind cache; only HTTP can be mirrored"
                .to_string()
        ),
        "{errors:?}"
    );
    let errors = errors_in(
        &config("{ cluster: http-shadow, perturb: { rate: 0.2, mode: shuffle } }").replace(
            "  - { name: shadow, kind: llm",
            "  - { name: http-shadow, kind: http, endpoints: [127.0.0.1:8101] }\n  - { name: shadow, kind: llm",
        ),
    );
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("routes[0].mirror.perturb.mode: unknown variant `shuffle`"),
        "{errors:?}"
    );
    let errors = errors_in(
        &config("{ cluster: http-shadow, perturb: { rate: 0.2 } }").replace(
            "  - { name: shadow, kind: llm",
            "  - { name: http-shadow, kind: http, endpoints: [127.0.0.1:8101] }\n  - { name: shadow, kind: llm",
        ),
    );
    assert_eq!(
        errors,
        vec!["routes[0].mirror.perturb: cluster `http-shadow` is kind http; only LLM prompts are perturbed"]
    );
}

#[test]
fn embeddings_defaults_and_errors() {
    let c = Config::from_yaml(&config(
        "{ cluster: shadow, compare: { embeddings: { cluster: shadow } } }",
    ))
    .unwrap();
    let e = c.routes[0]
        .mirror
        .clone()
        .unwrap()
        .compare
        .embeddings
        .unwrap();
    assert_eq!(
        e,
        EmbeddingsConfig {
            cluster: "shadow".into(),
            model: None,
            similarity_min: 0.82,
            kl_max: 0.38,
            window: 50,
            coverage: None,
            baseline: None,
        }
    );
    let errors = errors_in(&config(
        "{ cluster: shadow, compare: { embeddings: { cluster: redis, model: '', \
similarity_min: 1.5, kl_max: 0, window: 0 } } }",
    ));
    assert_eq!(
        errors,
        vec![
            "routes[0].mirror.compare.embeddings.cluster: cluster `redis` is kind cache; the embedder must be kind llm (an OpenAI-compatible /v1/embeddings)",
            "routes[0].mirror.compare.embeddings.similarity_min: 1.5 is not within -1..=1",
            "routes[0].mirror.compare.embeddings.kl_max: must be greater than 0, found 0",
            "routes[0].mirror.compare.embeddings.window: 0 is not within 1..=10000",
            "routes[0].mirror.compare.embeddings.model: must not be empty",
        ]
    );
    let errors = errors_in(&config(
        "{ cluster: shadow, compare: { embeddings: { cluster: nowhere } } }",
    ));
    assert_eq!(
        errors,
        vec!["routes[0].mirror.compare.embeddings.cluster: unknown cluster `nowhere`"]
    );
    let errors = errors_in(&config(
        "{ cluster: shadow, compare: { embeddings: { cluster: tls-shadow } } }",
    ));
    assert_eq!(
        errors,
        vec!["routes[0].mirror.compare.embeddings.cluster: cluster `tls-shadow` uses tls; the mirror sender speaks plain HTTP only"]
    );
}

#[test]
fn a_saved_baseline_is_read_at_load_and_a_bad_one_named() {
    let dir = std::env::temp_dir().join(format!("sluice-baseline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let with = |path: &str| {
        config(&format!(
            "{{ cluster: shadow, compare: {{ embeddings: {{ cluster: shadow, baseline: '{path}' }} }} }}"
        ))
    };
    let good = file(
        "good.json",
        r#"{"v": 1, "route": "chat", "similarities": [0.9, 1.0]}"#,
    );
    let c = Config::from_yaml(&with(&good)).unwrap();
    let e = c.routes[0]
        .mirror
        .clone()
        .unwrap()
        .compare
        .embeddings
        .unwrap();
    assert_eq!(
        e.baseline,
        Some(BaselineFile {
            path: good.clone(),
            similarities: vec![0.9, 1.0]
        })
    );
    let at = "routes[0].mirror.compare.embeddings.baseline";
    let bad = file("bad.json", r#"{"v": 1, "similarities": [0.9, 2]}"#);
    assert_eq!(
        errors_in(&with(&bad)),
        vec![format!(
            "{at}: {bad}: similarities[1]: 2 is not a cosine similarity (-1..=1)"
        )]
    );
    let garbled = file("garbled.json", "{\"v\": 1,\n  \"similarities\": 0.9}");
    assert_eq!(
        errors_in(&with(&garbled)),
        vec![format!(
            "{at}: {garbled}: line 2 column 21: similarities: invalid type: floating point `0.9`, expected a sequence"
        )]
    );
    let missing = dir.join("missing.json").display().to_string();
    assert_eq!(
        errors_in(&with(&missing)),
        vec![format!(
            "{at}: {missing}: No such file or directory (os error 2)"
        )]
    );
    assert_eq!(
        errors_in(&with("")),
        vec![format!("{at}: must name a file")]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
