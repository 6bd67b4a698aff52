//! `service: grpc` steps: the method, the message (raw `base64:` or
//! `hex:`, or `json:` through a descriptor set), metadata, the target,
//! and every error by its path.

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
    for two in [
        r#"{ hex: "00", base64: "AA==" }"#,
        r#"{ hex: "00", json: {}, descriptor_set: t.pb }"#,
    ] {
        assert_eq!(
            at(two),
            ["steps[0].message: give one of `base64`, `hex` and `json`"]
        );
    }
    assert_eq!(
        at("{}"),
        [
            "steps[0].message: needs `base64` or `hex` (raw protobuf bytes), or `json` with \
          `descriptor_set`"
        ]
    );
    // json needs its descriptor set, and a descriptor set is read only with json.
    assert_eq!(
        at("{ json: { text: hello } }"),
        [
            "steps[0].message: `json` needs `descriptor_set` (a FileDescriptorSet, as `protoc \
          --descriptor_set_out=F --include_imports` writes)"
        ]
    );
    assert_eq!(
        at(r#"{ hex: "00", descriptor_set: t.pb }"#),
        ["steps[0].message.descriptor_set: is read only with `json`"]
    );
}

/// `package t; message Req { string text = 1; int32 n = 2; repeated string
/// tags = 3; } service S { rpc M(Req) returns (Req); rpc Up(stream Req)
/// returns (Req); }` as protoc's `--descriptor_set_out` writes it, in a
/// directory of its own (`t.pb`, and `bad.pb` that is not one).
fn descriptor_dir(name: &str) -> std::path::PathBuf {
    use prost_reflect::prost::Message as _;
    use prost_reflect::prost_types::field_descriptor_proto::{Label, Type};
    use prost_reflect::prost_types::{
        DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet,
        MethodDescriptorProto, ServiceDescriptorProto,
    };
    let field = |name: &str, number: i32, ty: Type, label: Label| FieldDescriptorProto {
        name: Some(name.to_owned()),
        number: Some(number),
        r#type: Some(ty as i32),
        label: Some(label as i32),
        json_name: Some(name.to_owned()),
        ..Default::default()
    };
    let method = |name: &str, client_streaming: bool| MethodDescriptorProto {
        name: Some(name.to_owned()),
        input_type: Some(".t.Req".to_owned()),
        output_type: Some(".t.Req".to_owned()),
        client_streaming: Some(client_streaming),
        ..Default::default()
    };
    let set = FileDescriptorSet {
        file: vec![FileDescriptorProto {
            name: Some("t.proto".to_owned()),
            package: Some("t".to_owned()),
            syntax: Some("proto3".to_owned()),
            message_type: vec![DescriptorProto {
                name: Some("Req".to_owned()),
                field: vec![
                    field("text", 1, Type::String, Label::Optional),
                    field("n", 2, Type::Int32, Label::Optional),
                    field("tags", 3, Type::String, Label::Repeated),
                ],
                ..Default::default()
            }],
            service: vec![ServiceDescriptorProto {
                name: Some("S".to_owned()),
                method: vec![method("M", false), method("Up", true)],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let dir = std::env::temp_dir().join(format!("sluice-grpc-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("t.pb"), set.encode_to_vec()).unwrap();
    std::fs::write(dir.join("bad.pb"), b"\xff\xff").unwrap();
    dir
}

const JSON: &str = r#"
scenario: embed
target: { base_url: "http://127.0.0.1:8080" }
workload: { arrival: { kind: constant, rate: 2 }, duration: 5s }
steps:
  - { name: m, service: grpc, method: t.S/M,
      message: { json: { text: hi, n: 3 }, descriptor_set: t.pb } }
"#;

#[test]
fn a_grpc_message_in_json_is_encoded_at_load_by_the_methods_input_type() {
    let dir = descriptor_dir("encode");
    let read = |text: &str| {
        Scenario::from_yaml(text, &dir, &env).unwrap().steps[0]
            .body
            .clone()
    };
    // text = 1 "hi", n = 2 3: the bytes protoc writes for them.
    assert_eq!(
        read(JSON),
        Body::Grpc(vec![0x0a, 0x02, b'h', b'i', 0x10, 0x03])
    );
    // A repeated field, an int64-style string for an int32 (the JSON mapping
    // takes both), the empty message.
    let text = JSON.replace("{ text: hi, n: 3 }", r#"{ n: "3", tags: [a, b] }"#);
    assert_eq!(
        read(&text),
        Body::Grpc(vec![0x10, 0x03, 0x1a, 0x01, b'a', 0x1a, 0x01, b'b'])
    );
    assert_eq!(
        read(&JSON.replace("{ text: hi, n: 3 }", "{}")),
        Body::Grpc(Vec::new())
    );
    // Relative to the scenario's directory, not the working one.
    assert_eq!(
        errors(JSON),
        ["steps[0].message.descriptor_set: t.pb: No such file or directory (os error 2)"]
    );
}

#[test]
fn a_json_message_names_what_is_wrong_with_its_file_method_or_fields() {
    let dir = descriptor_dir("errors");
    let errors = |from: &str, to: &str| -> Vec<String> {
        let text = JSON.replace(from, to);
        Scenario::from_yaml(&text, &dir, &env)
            .unwrap_err()
            .0
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    assert_eq!(
        errors("t.pb", "missing.pb"),
        ["steps[0].message.descriptor_set: missing.pb: No such file or directory (os error 2)"]
    );
    assert_eq!(
        errors("t.pb", "bad.pb"),
        ["steps[0].message.descriptor_set: bad.pb: failed to decode file descriptor set"]
    );
    assert_eq!(
        errors("text: hi", "txt: hi"),
        ["steps[0].message.json: t.Req: unrecognized field name 'txt'"]
    );
    // A bad value is named by its path inside `json`.
    assert_eq!(
        errors("n: 3", "n: three"),
        ["steps[0].message.json.n: t.Req: invalid digit found in string"]
    );
    assert_eq!(
        errors("n: 3", "tags: [a, { b: c }]"),
        ["steps[0].message.json.tags[1]: t.Req: invalid type: map, expected a string"]
    );
    assert_eq!(
        errors("t.S/M", "t.Nope/M"),
        ["steps[0].method: t.Nope/M: no such service in t.pb"]
    );
    assert_eq!(
        errors("t.S/M", "t.S/Nope"),
        ["steps[0].method: t.S/Nope: no such method in t.pb (t.S has M, Up)"]
    );
    assert_eq!(
        errors("t.S/M", "t.S/Up"),
        [
            "steps[0].method: t.S/Up: client-streaming methods are not supported yet (one request \
          message)"
        ]
    );
    // A malformed method is said once, as for raw bytes: not looked up.
    assert_eq!(
        errors("t.S/M", "t.S"),
        [
            "steps[0].method: must be package.Service/Method (one `/`, names of letters, digits, \
          `_` and `.`), found `t.S`"
        ]
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
