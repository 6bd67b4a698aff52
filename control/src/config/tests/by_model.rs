//! `match.model`, `rewrite.<cluster>.model` and `limits` on routes.

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

#[test]
fn limits_are_read_with_their_defaults() {
    let c = Config::from_yaml(&GOOD.replacen(
        "sticky: { header: X-Session-Id }",
        "sticky: { header: X-Session-Id }\n    limits: { descriptor: [header:X-Tenant, model], total_tokens_per_minute: 1000 }",
        1,
    ))
    .unwrap();
    let l = c.routes[0].limits.as_ref().unwrap();
    assert_eq!(l.descriptor_label(), "header:x-tenant,model");
    assert_eq!(l.limits.total_tokens_per_minute, Some(1000));
    assert_eq!(l.default_max_tokens, DEFAULT_MAX_TOKENS);
}

#[test]
fn bad_limits() {
    assert_eq!(
        errors_of(
            "sticky: { header: X-Session-Id }",
            "limits: { descriptor: [route, tenant, \"header:\"], requests_per_minute: 0, total_tokens_per_minute: 5 }"
        ),
        [
            "routes[0].limits.descriptor[1]: unknown descriptor `tenant` (route, model or header:NAME)",
            "routes[0].limits.descriptor[2]: unknown descriptor `header:` (route, model or header:NAME)",
            "routes[0].limits.requests_per_minute: must be at least 1, found 0",
        ]
    );
    assert_eq!(
        errors_of(
            "sticky: { header: X-Session-Id }",
            "limits: { default_max_tokens: 0 }"
        ),
        [
            "routes[0].limits.default_max_tokens: must be at least 1, found 0",
            "routes[0].limits: no limit set (requests_per_minute, input_tokens_per_minute, \
             output_tokens_per_minute, total_tokens_per_minute or concurrent_streams)",
        ]
    );
}
