//! The document against the table: one operation per row and nothing else,
//! every reference resolves, every operation documents its answers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use super::*;

/// Every `$ref` in `value`.
fn refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("$ref", Value::String(r)) => out.push(r),
                    _ => refs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

#[test]
fn every_row_of_the_table_is_one_operation_and_nothing_else_is() {
    let doc = document();
    assert_eq!(doc["openapi"], "3.1.0");
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, _) in item.as_object().unwrap() {
            documented.insert(format!("{} {path}", method.to_uppercase()));
        }
    }
    let table: BTreeSet<String> = ApiEndpoint::ALL.iter().map(|e| e.to_string()).collect();
    assert_eq!(documented, table);
    assert!(table.contains("GET /v1/openapi.json"));
}

#[test]
fn references_resolve_and_every_operation_documents_its_answers() {
    let doc = document();
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(all.len() > 40, "{}", all.len());
    for r in all {
        let name = r.strip_prefix("#/components/schemas/").unwrap();
        assert!(doc["components"]["schemas"][name].is_object(), "{r}");
    }
    let mut ids = BTreeSet::new();
    for &endpoint in ApiEndpoint::ALL {
        let op = &doc["paths"][endpoint.template()][endpoint.method().to_lowercase()];
        assert!(ids.insert(op["operationId"].as_str().unwrap().to_owned()));
        let statuses: Vec<&String> = op["responses"].as_object().unwrap().keys().collect();
        assert!(statuses.iter().any(|s| s.starts_with('2')), "{endpoint}");
        let guarded = endpoint.template().starts_with("/v1/");
        for status in ["401", "403", "429"] {
            assert_eq!(statuses.iter().any(|s| *s == status), guarded, "{endpoint}");
        }
        let scope = endpoint.scope().map(|s| json!(s.as_str()));
        assert_eq!(op.get("x-sluice-scope"), scope.as_ref(), "{endpoint}");
        assert_eq!(op["security"] == json!([]), !guarded, "{endpoint}");
        let placeholders = endpoint.template().matches('{').count();
        let parameters = op["parameters"].as_array().map_or(0, Vec::len);
        assert_eq!(parameters, placeholders, "{endpoint}");
        if op["requestBody"].is_object() {
            for status in ["400", "413"] {
                assert!(op["responses"][status].is_object(), "{endpoint}: {status}");
            }
        }
    }
}

#[test]
fn the_command_parameter_takes_the_commands_and_the_answer_is_json() {
    let doc = document();
    let op = &doc["paths"]["/v1/rollouts/{name}/{command}"]["post"];
    assert_eq!(op["parameters"][1]["name"], "command");
    assert_eq!(
        op["parameters"][1]["schema"]["enum"],
        json!(["pause", "resume", "promote", "abort"])
    );
    let answer = get();
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(answer.headers()["content-type"], "application/json");
}
