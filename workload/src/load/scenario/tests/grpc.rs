//! `service: grpc` steps: the method, the raw message (`base64:` or
//! `hex:`), metadata, the target, and every error by its path.

use super::*;

const GRPC: &str = r#"
scenario: embed
target: { base_url: "http://127.0.0.1:8080", headers: { authorization: "Bearer ${API_KEY}" } }
workload: { arrival: { kind: constant, rate: 2 }, duration: 5s }
steps:
  - { name: embed, service: grpc, target: "http://127.0.0.1:50051/", method: embed.v1.Embedder/Embed,
      message: { base64: "CgVoZWxsbw==" }, timeout: 2s, metadata: { x-tenant: "{{tenant}}" } }
  - { name: answer, service: llm, depends_on: embed, when: embed.ok, prompt: "Q: {{embed.text}}" }
data: { tenant: { values: [a, b] } }
"#;

#[test]
fn a_grpc_step_reads_with_its_method_message_and_metadata() {
    let s = parse(GRPC).unwrap();
    let embed = &s.steps[0];
    assert_eq!(embed.service, Service::Grpc);
    assert_eq!(embed.service.as_str(), "grpc");
    assert_eq!(embed.method, "POST");
    let mut vars = std::collections::BTreeMap::new();
    vars.insert("tenant".to_owned(), "a".to_owned());
    assert_eq!(embed.path.render(&vars), "/embed.v1.Embedder/Embed");
    assert_eq!(embed.body, Body::Grpc(b"\n\x05hello".to_vec()));
    assert_eq!(embed.target.as_deref(), Some("http://127.0.0.1:50051"));
    assert_eq!(embed.timeout, Duration::from_secs(2));
    let metadata: Vec<(String, String)> = embed
        .headers
        .iter()
        .map(|(n, t)| (n.clone(), t.render(&vars)))
        .collect();
    assert_eq!(metadata, [("x-tenant".to_owned(), "a".to_owned())]);
    assert!(embed.keep_text);
    assert_eq!(s.steps[1].when.as_ref().unwrap().ended, Ended::Ok);

    // hex, any case, spaces between bytes; no message is an empty one; no
    // target is the scenario's.
    let text = GRPC.replace(r#"base64: "CgVoZWxsbw==""#, r#"hex: "0a 05 68656C6c6f""#);
    assert_eq!(
        parse(&text).unwrap().steps[0].body,
        Body::Grpc(b"\n\x05hello".to_vec())
    );
    let text = GRPC
        .replace(r#"message: { base64: "CgVoZWxsbw==" }, "#, "")
        .replace(r#"target: "http://127.0.0.1:50051/", "#, "");
    let s = parse(&text).unwrap();
    assert_eq!(s.steps[0].body, Body::Grpc(Vec::new()));
    assert_eq!(s.steps[0].target, None);
    assert_eq!(s.steps[0].timeout, Duration::from_secs(2));
    // https is h2 over TLS (ALPN), under the scenario's `ca_file` or Mozilla's roots.
    let text = GRPC.replace("http://127.0.0.1:50051/", "https://embed.example:443");
    assert!(parse(&text).is_ok());
}

#[test]
fn a_grpc_step_takes_no_http_or_llm_keys() {
    let text = GRPC.replace(
        "timeout: 2s,",
        "timeout: 2s, path: /x, headers: { a: b }, body: { a: 1 }, stream: true, max_tokens: 3, \
         command: [GET, x], extract: { v: $.a },",
    );
    let not = "is not for grpc steps (they send `method`, `message` and `metadata`)";
    assert_eq!(
        errors(&text),
        [
            format!("steps[0].path: {not}"),
            format!("steps[0].headers: {not}"),
            format!("steps[0].body: {not}"),
            format!("steps[0].max_tokens: {not}"),
            format!("steps[0].stream: {not}"),
            format!("steps[0].command: {not}"),
            format!("steps[0].extract: {not}"),
        ]
    );
    // And the grpc keys are for grpc steps.
    let text = GRPC.replace(
        r#"prompt: "Q: {{embed.text}}""#,
        r#"prompt: "Q", message: { hex: "00" }, metadata: { a: b }"#,
    );
    assert_eq!(
        errors(&text),
        [
            "steps[1].message: is for grpc steps (a llm step sends `body` and `headers`)",
            "steps[1].metadata: is for grpc steps (a llm step sends `body` and `headers`)",
        ]
    );
    let text = GRPC.replace(
        "\ndata: {",
        "\n  - { name: c, service: redis, target: \"127.0.0.1:6379\", command: [GET, x], \
         message: { hex: \"00\" } }\ndata: {",
    );
    assert_eq!(
        errors(&text),
        ["steps[2].message: is not for redis steps (they send `command`)"]
    );
}

#[test]
fn a_grpc_method_is_package_service_slash_method() {
    let must = |m: &str| {
        format!(
            "steps[0].method: must be package.Service/Method (one `/`, names of letters, digits, \
             `_` and `.`), found `{m}`"
        )
    };
    for bad in [
        "embed.v1.Embedder",
        "/embed.v1.Embedder/Embed",
        "embed.v1.Embedder/",
        "a/b/c",
        "embed v1/Embed",
        "POST",
    ] {
        let text = GRPC.replace(
            "method: embed.v1.Embedder/Embed",
            &format!("method: \"{bad}\""),
        );
        assert_eq!(errors(&text), [must(bad)], "{bad}");
    }
    let text = GRPC.replace("method: embed.v1.Embedder/Embed,", "");
    assert_eq!(
        errors(&text),
        ["steps[0].method: a grpc step needs a method like package.Service/Method"]
    );
}

#[test]
fn a_grpc_message_is_base64_or_hex_bytes() {
    let at = |message: &str| {
        let text = GRPC.replace(r#"{ base64: "CgVoZWxsbw==" }"#, message);
        errors(&text)
    };
    assert_eq!(
        at(r#"{ base64: "not base64!" }"#),
        ["steps[0].message: base64: not base64: Invalid symbol 32, offset 3."]
    );
    assert_eq!(
        at(r#"{ hex: "0a0" }"#),
        ["steps[0].message: hex: an odd number of digits (3), found `0a0`"]
    );
    assert_eq!(
        at(r#"{ hex: "0g" }"#),
        ["steps[0].message: hex: `g` is not a hex digit"]
    );
    assert_eq!(
        at(r#"{ hex: "00", base64: "AA==" }"#),
        ["steps[0].message: give one of `base64` and `hex`"]
    );
    assert_eq!(
        at("{}"),
        ["steps[0].message: needs `base64` or `hex` (raw protobuf bytes)"]
    );
    // JSON with a descriptor set is not read: an unknown key.
    let e = at(r#"{ json: { text: hello } }"#);
    assert_eq!(e.len(), 1);
    assert!(
        e[0].starts_with("steps[0].message.json: unknown field `json`, expected `base64` or `hex`"),
        "{e:?}"
    );
}

#[test]
fn grpc_metadata_keys_target_and_timeout_are_checked() {
    let text = GRPC.replace(
        r#"metadata: { x-tenant: "{{tenant}}" }"#,
        r#"metadata: { X-Tenant: a, grpc-timeout: 1S, trace-bin: AAA=, ok: "{{nope}}" }"#,
    );
    assert_eq!(
        errors(&text),
        [
            "steps[0].metadata.X-Tenant: a metadata key is lowercase letters, digits, `-`, `_` \
             and `.`, found `X-Tenant`",
            "steps[0].metadata.grpc-timeout: `grpc-timeout`: grpc- keys are the protocol's own \
             (set `timeout` for grpc-timeout)",
            "steps[0].metadata.ok: unknown variable `nope` (known: tenant, tenant_hash)",
            "steps[0].metadata.trace-bin: `trace-bin`: binary (-bin) metadata is not supported",
        ]
    );
    let text = GRPC.replace("http://127.0.0.1:50051/", "127.0.0.1:50051");
    assert_eq!(
        errors(&text),
        [
            "steps[0].target: must be a URL like http://127.0.0.1:8080 or https://host, found \
             `127.0.0.1:50051`"
        ]
    );
    let text = GRPC.replace("timeout: 2s", "timeout: 0s");
    assert_eq!(errors(&text), ["steps[0].timeout: must be greater than 0"]);
}

#[test]
fn the_grpc_example_in_the_docs_reads() {
    let docs = include_str!("../../../../../docs/workload.md");
    let after = docs.split("### gRPC steps").nth(1).unwrap();
    let yaml = after.split("```yaml\n").nth(1).unwrap();
    let yaml = yaml.split("```").next().unwrap();
    let s = parse(yaml).unwrap();
    let services: Vec<&str> = s.steps.iter().map(|x| x.service.as_str()).collect();
    assert_eq!(services, ["grpc", "llm"]);
    assert_eq!(s.steps[0].body, Body::Grpc(b"\n\x05hello".to_vec()));
    assert_eq!(s.steps[0].target.as_deref(), Some("http://127.0.0.1:50051"));
}
