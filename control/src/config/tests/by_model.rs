//! `match.model` and `rewrite.<cluster>.model` on routes.

use super::*;

#[test]
fn model_glob_and_rewrite_are_read() {
    let c = Config::from_yaml(
        &GOOD
            .replacen(
                "sticky: { header: X-Session-Id }",
                "sticky: { header: X-Session-Id }\n    rewrite: { llm-canary: { model: ckpt-2 } }",
                1,
            )
            .replacen("headers: { X-Tenant: a } }", "model: \"gpt-*\" }", 1),
    )
    .unwrap();
    let route = &c.routes[0];
    assert_eq!(
        route.matcher.model.as_ref().map(|g| g.as_str()),
        Some("gpt-*")
    );
    assert_eq!(
        route.rewrite_model.get("llm-canary").map(String::as_str),
        Some("ckpt-2")
    );
}

#[test]
fn bad_model_match_and_rewrite() {
    assert_eq!(
        errors_of("headers: { X-Tenant: a } }", "model: \" \" }"),
        ["routes[0].match.model: must not be empty"]
    );
    assert_eq!(
        errors_of(
            "sticky: { header: X-Session-Id }",
            "rewrite: { llm-shadow: { model: m }, llm-canary: { model: \"\" } }"
        ),
        [
            "routes[0].rewrite.llm-canary.model: must not be empty",
            "routes[0].rewrite.llm-shadow: `llm-shadow` is not in the route's split",
        ]
    );
}
