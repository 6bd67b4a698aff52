//! The full-link keys: redis and vector steps, `target:` per step,
//! `when: STEP.hit|miss`, `setup:`/`teardown:` and `{{STEP.text}}`.

use super::*;

/// The issue's RAG journey, with a setup and a teardown.
const RAG: &str = r#"
scenario: rag
target: { base_url: "http://127.0.0.1:8080" }
setup:
  - { name: create, service: vector, method: POST, path: /api/v2/collections,
      body: { name: docs }, target: "http://127.0.0.1:8000/", extract: { coll: "$.id" } }
  - { name: fill, service: vector, method: POST, path: "/api/v2/collections/{{coll}}/add",
      body: { ids: [a], note: "{{create.text}}" }, target: "http://127.0.0.1:8000" }
teardown:
  - { name: drop, service: vector, method: DELETE, path: /api/v2/collections/docs,
      target: "http://127.0.0.1:8000" }
workload: { arrival: { kind: constant, rate: 2 }, duration: 5s }
steps:
  - { name: cache, service: redis, command: [GET, "q:{{query_hash}}"], target: "127.0.0.1:6380" }
  - { name: search, service: vector, method: POST, path: "/api/v2/collections/{{coll}}/query",
      body: { n_results: 2 }, depends_on: cache, when: cache.miss,
      target: "http://127.0.0.1:8000", extract: { ids: "$.ids[0]" } }
  - { name: answer, service: llm, depends_on: search, prompt: "Context: {{ids}} Q: {{query}}" }
  - { name: store, service: redis, command: [SET, "q:{{query_hash}}", "{{answer.text}}"],
      depends_on: answer, target: "127.0.0.1:6380" }
data: { query: { values: [a, b] } }
"#;

#[test]
fn the_rag_journey_reads_with_its_setup_and_teardown() {
    let s = parse(RAG).unwrap();
    let cache = &s.steps[0];
    assert_eq!(cache.service, Service::Redis);
    assert_eq!(cache.target.as_deref(), Some("127.0.0.1:6380"));
    let mut vars = std::collections::BTreeMap::new();
    vars.insert("query_hash".to_owned(), "h".to_owned());
    vars.insert("answer.text".to_owned(), "the answer".to_owned());
    let args: Vec<String> = cache.command.iter().map(|t| t.render(&vars)).collect();
    assert_eq!(args, ["GET", "q:h"]);
    let store: Vec<String> = s.steps[3].command.iter().map(|t| t.render(&vars)).collect();
    assert_eq!(store, ["SET", "q:h", "the answer"]);
    assert_eq!(
        s.steps[1].when,
        Some(When {
            step: "cache".into(),
            ended: Ended::Miss
        })
    );
    assert_eq!(s.steps[1].service, Service::Vector);
    assert_eq!(s.steps[1].target.as_deref(), Some("http://127.0.0.1:8000"));
    assert_eq!(s.steps[2].target, None);
    // Only the answer's text is used later: only it is kept.
    let kept: Vec<bool> = s.steps.iter().map(|x| x.keep_text).collect();
    assert_eq!(kept, [false, false, true, false]);
    assert_eq!(s.setup.len(), 2);
    assert!(s.setup[0].keep_text && !s.setup[1].keep_text);
    assert_eq!(s.setup[0].target.as_deref(), Some("http://127.0.0.1:8000"));
    assert_eq!(s.teardown[0].method, "DELETE");
}

#[test]
fn a_redis_step_needs_a_command_and_its_server_and_takes_no_http_keys() {
    let text = RAG.replace(
        r#"command: [GET, "q:{{query_hash}}"], target: "127.0.0.1:6380""#,
        "path: /x, body: { a: 1 }, stream: true",
    );
    assert_eq!(
        errors(&text),
        [
            "steps[0].path: is not for redis steps (they send `command`)",
            "steps[0].body: is not for redis steps (they send `command`)",
            "steps[0].stream: is not for redis steps (they send `command`)",
            "steps[0].command: a redis step needs a command like [GET, key]",
            "steps[0].target: a redis step needs the server's HOST:PORT (like 127.0.0.1:6379) or a redis:// URL",
        ]
    );
    let must = |t: &str| {
        format!(
            "must be HOST:PORT like 127.0.0.1:6379, or redis://[:PASSWORD@]HOST:PORT[/DB], found `{t}`"
        )
    };
    for (target, error) in [
        ("127.0.0.1", must("127.0.0.1")),
        ("127.0.0.1:0", must("127.0.0.1:0")),
        ("http://127.0.0.1:6380", must("http://127.0.0.1:6380")),
        ("redis://127.0.0.1", must("redis://127.0.0.1")),
        (
            "redis://127.0.0.1:6380/x",
            format!(
                "{}: the database `x` is not a number",
                must("redis://127.0.0.1:6380/x")
            ),
        ),
        (
            "rediss://127.0.0.1:6380",
            "rediss:// (Redis over TLS) is not supported yet".to_owned(),
        ),
        (
            "redis://:${NOT_SET}@127.0.0.1:6380",
            "environment variable `NOT_SET` is not set".to_owned(),
        ),
    ] {
        let text = RAG.replacen(
            r#"target: "127.0.0.1:6380""#,
            &format!("target: \"{target}\""),
            1,
        );
        assert_eq!(errors(&text), [format!("steps[0].target: {error}")]);
    }
    let text = RAG.replace(r#"[GET, "q:{{query_hash}}"]"#, r#"[GET, "q:{{nope}}"]"#);
    assert_eq!(
        errors(&text),
        ["steps[0].command[1]: unknown variable `nope` (known: coll, ids, query, query_hash)"]
    );
    let text = RAG.replace(r#"[GET, "q:{{query_hash}}"]"#, "[]");
    assert_eq!(errors(&text), ["steps[0].command: is empty"]);
}

#[test]
fn a_redis_target_may_be_a_url_with_a_password_from_the_environment() {
    for target in [
        "redis://127.0.0.1:6380",
        "redis://127.0.0.1:6380/2",
        "redis://:${API_KEY}@127.0.0.1:6380/0",
        "redis://default:p@ss/w@rd@127.0.0.1:6380",
    ] {
        let text = RAG.replacen(
            r#"target: "127.0.0.1:6380""#,
            &format!("target: \"{target}\""),
            1,
        );
        let s = parse(&text).unwrap();
        // Kept as written: the password's value is read when the run
        // connects, never stored in the scenario or its results.
        assert_eq!(s.steps[0].target.as_deref(), Some(target));
    }
}

#[test]
fn a_step_target_is_a_url_and_command_is_for_redis() {
    let text = RAG.replace(
        r#"depends_on: cache, when: cache.miss,
      target: "http://127.0.0.1:8000""#,
        r#"depends_on: cache, when: cache.miss, command: [GET, x],
      target: "127.0.0.1:8000""#,
    );
    assert_eq!(
        errors(&text),
        [
            "steps[1].command: is for redis steps",
            "steps[1].target: must be a URL like http://127.0.0.1:8080 or https://host, found `127.0.0.1:8000`",
        ]
    );
    let text = RAG.replace(
        "service: vector, method: DELETE, path: /api/v2/collections/docs,",
        "service: vector, method: DELETE,",
    );
    assert_eq!(
        errors(&text),
        ["teardown[0].path: a vector step needs a path"]
    );
    let text = RAG.replace("name: answer, service: llm", "name: answer, service: soap");
    assert_eq!(
        errors(&text),
        ["steps[2].service: unknown service `soap` (expected one of llm, http, vector, redis, grpc)"]
    );
}

#[test]
fn hit_and_miss_are_of_a_redis_step_depended_on() {
    let text = RAG.replace("when: cache.miss", "when: cache.hit");
    assert_eq!(
        parse(&text).unwrap().steps[1].when.as_ref().unwrap().ended,
        Ended::Hit
    );
    let text = RAG.replace(
        "depends_on: search, prompt",
        "depends_on: search, when: search.miss, prompt",
    );
    assert_eq!(
        errors(&text),
        [
            "steps[2].when: `search.miss`: hit and miss are of redis steps, and `search` is a \
          vector step"
        ]
    );
    let text = RAG.replace(
        "depends_on: search, prompt",
        "depends_on: search, when: cache.hit, prompt",
    );
    assert_eq!(
        errors(&text),
        ["steps[2].when: `cache.hit` names `cache`, which this step does not depend on"]
    );
}

#[test]
fn a_step_text_is_of_a_step_that_runs_before() {
    // `store` depends on `answer`, which depends on `search`: both texts.
    let text = RAG.replace(
        "\"{{answer.text}}\"]",
        "\"{{answer.text}}{{search.text}}\"]",
    );
    assert!(parse(&text).is_ok());
    let text = RAG.replace("Q: {{query}}", "Q: {{query}} {{store.text}}");
    assert_eq!(
        errors(&text),
        [
            "steps[2].prompt: `{{store.text}}` is the answer of `store`, which does not run \
          before this step (name it in depends_on)"
        ]
    );
    let text = RAG.replace("Q: {{query}}", "Q: {{query}} {{nope.text}}");
    assert_eq!(
        errors(&text),
        ["steps[2].prompt: `{{nope.text}}` names unknown step `nope`"]
    );
    // In setup: the steps before it only.
    let text = RAG.replace("{{create.text}}", "{{fill.text}}");
    assert_eq!(
        errors(&text),
        [
            "setup[1].body: `{{fill.text}}` is the answer of `fill`, which does not run before \
          this step (name it in depends_on)"
        ]
    );
}

#[test]
fn setup_steps_run_once_in_order_and_use_no_data() {
    let text = RAG.replace(
        "body: { name: docs },",
        "body: { name: \"{{query}}\" }, depends_on: fill, delay: 1s, when: fill.ok,",
    );
    assert_eq!(
        errors(&text),
        [
            "setup[0].depends_on: is not for setup steps (they run once, in order)",
            "setup[0].when: is not for setup steps (they run once, in order)",
            "setup[0].delay: is not for setup steps (they run once, in order)",
            "setup[0].body: unknown variable `query` (known: coll)",
        ]
    );
}

#[test]
fn the_full_link_example_in_the_docs_reads() {
    let docs = include_str!("../../../../../docs/workload.md");
    let after = docs.split("### A full-link journey").nth(1).unwrap();
    let yaml = after.split("```yaml\n").nth(1).unwrap();
    let yaml = yaml.split("```").next().unwrap();
    let s = parse(yaml).unwrap();
    let services: Vec<&str> = s.steps.iter().map(|x| x.service.as_str()).collect();
    assert_eq!(services, ["redis", "vector", "llm", "redis"]);
    assert_eq!((s.setup.len(), s.teardown.len()), (2, 1));
    assert!(s.steps[2].keep_text);
}
