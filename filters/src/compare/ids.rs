//! Ids in a JSON answer selected by a pointer with `*` wildcards, and
//! recall@k between two lists of them.

use std::collections::HashSet;

use serde_json::Value;

/// The values at `pointer` (RFC 6901, plus `*` for every element of an
/// array or value of an object), in document order, as strings: a string
/// as it is, anything else as its JSON text. `/results/*/id` reads the ids
/// of a vector search's hits; `/ids/0/*` Chroma's first query.
pub fn ids_at(doc: &Value, pointer: &str) -> Vec<String> {
    let segments: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect();
    let mut out = Vec::new();
    walk(doc, &segments, &mut out);
    out
}

fn walk(value: &Value, segments: &[String], out: &mut Vec<String>) {
    let Some((head, rest)) = segments.split_first() else {
        out.push(match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        });
        return;
    };
    match (head.as_str(), value) {
        ("*", Value::Array(items)) => items.iter().for_each(|v| walk(v, rest, out)),
        ("*", Value::Object(map)) => map.values().for_each(|v| walk(v, rest, out)),
        (key, Value::Object(map)) => {
            if let Some(v) = map.get(key) {
                walk(v, rest, out);
            }
        }
        (index, Value::Array(items)) => {
            if let Some(v) = index.parse::<usize>().ok().and_then(|i| items.get(i)) {
                walk(v, rest, out);
            }
        }
        _ => {}
    }
}

/// recall@k with k = the primary's count: the share of the primary's ids
/// found among the shadow's first k. 1.0 when the primary has none and the
/// shadow none either; 0.0 when only the shadow has some.
pub fn recall_at_k(primary: &[String], shadow: &[String]) -> f64 {
    let k = primary.len();
    if k == 0 {
        return if shadow.is_empty() { 1.0 } else { 0.0 };
    }
    let top: HashSet<&str> = shadow.iter().take(k).map(String::as_str).collect();
    let wanted: HashSet<&str> = primary.iter().map(String::as_str).collect();
    wanted.iter().filter(|id| top.contains(*id)).count() as f64 / wanted.len() as f64
}
