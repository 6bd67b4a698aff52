use std::time::Duration;

use sluice_filters::Bodies;

use super::*;

fn with_recorder(recorder: &str) -> String {
    format!("{GOOD}recorder: {recorder}\n")
}

#[test]
fn every_key_and_the_defaults() {
    let c = Config::from_yaml(&with_recorder(
        "{ path: /var/trace.jsonl, rotate_bytes: 1MiB, max_bytes: 2GiB, percent: 5%, \
         session_header: X-User, routes: [chat], bodies: none, \
         redaction: { patterns: ['order-\\d+'], drop_keys: [ssn], key_env: KEY }, ttl: 30m, \
         priority: normal }",
    ))
    .unwrap();
    let r = c.recorder.unwrap();
    assert_eq!(r.path, std::path::PathBuf::from("/var/trace.jsonl"));
    assert_eq!((r.rotate_bytes, r.max_bytes), (1 << 20, 2 << 30));
    assert_eq!(r.percent, 5.0);
    assert_eq!(r.session_header.as_deref(), Some("x-user"));
    assert_eq!(r.routes, ["chat"]);
    assert_eq!(r.bodies, Bodies::None);
    assert_eq!(r.redaction.drop_keys, ["ssn"]);
    assert_eq!(r.key_env.as_deref(), Some("KEY"));
    assert_eq!(r.ttl, Some(Duration::from_secs(1800)));
    assert_eq!(r.priority, crate::SidePriority::Normal);

    let d = Config::from_yaml(&with_recorder("{ path: t.jsonl }"))
        .unwrap()
        .recorder
        .unwrap();
    assert_eq!(
        (d.percent, d.bodies, d.ttl),
        (100.0, Bodies::Redacted, None)
    );
    assert!(d.routes.is_empty() && d.session_header.is_none());
    // The writer takes only CPU time the data plane leaves.
    assert_eq!(d.priority, crate::SidePriority::Idle);
    // The route's sticky header is the session header.
    assert_eq!(d.session_header(Some("x-session-id")), "x-session-id");
}

#[test]
fn every_bad_value_is_named() {
    let errors = errors_in(&with_recorder(
        "{ path: '', rotate_bytes: 100, max_bytes: 0, percent: 150, session_header: Authorization, \
         routes: [chat, nope, chat], bodies: full, \
         redaction: { patterns: ['(', ''], drop_keys: [''], key_env: '' }, ttl: 0s }",
    ));
    let want = [
        "recorder.path: must be a file path",
        "recorder.rotate_bytes: 100 bytes is less than the least, 4KiB",
        "recorder.max_bytes: must be greater than 0",
        "recorder.percent: 150 is not within 0..=100",
        "recorder.session_header: `authorization` carries credentials, which are never recorded",
        "recorder.routes[1]: unknown route `nope`",
        "recorder.routes[2]: route `chat` is listed twice",
        "recorder.bodies: `full` writes prompts with their secrets; set `allow_unredacted: true` to allow it",
        "recorder.redaction.drop_keys[0]: must be a JSON key",
        "recorder.redaction.key_env: must name an environment variable",
        "recorder.ttl: must be greater than 0",
    ];
    for w in want {
        assert!(
            errors.iter().any(|e| e == w),
            "missing `{w}` in {errors:#?}"
        );
    }
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("recorder.redaction.patterns[0]: ")),
        "{errors:#?}"
    );
}

#[test]
fn full_bodies_need_the_explicit_allowance() {
    let c = Config::from_yaml(&with_recorder(
        "{ path: t.jsonl, bodies: full, allow_unredacted: true }",
    ))
    .unwrap();
    assert_eq!(c.recorder.unwrap().bodies, Bodies::Full);
}

#[test]
fn an_unknown_key_is_refused_with_its_path() {
    let errors = errors_in(&with_recorder("{ path: t.jsonl, sample: 5 }"));
    assert!(
        errors[0].starts_with("recorder.sample: unknown field `sample`"),
        "{errors:?}"
    );
}
