//! The JSONPath subset of `extract:`: `$`, then `.name` and `[index]`
//! segments (`$.ids[0]`, `$.data[0].embedding`).

use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// A parsed path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonPath {
    segments: Vec<Segment>,
}

impl JsonPath {
    pub fn parse(text: &str) -> Result<JsonPath, String> {
        let bad = |why: &str| format!("`{text}` is not a path like $.a.b[0] ({why})");
        let mut rest = text
            .strip_prefix('$')
            .ok_or_else(|| bad("it starts with `$`"))?;
        let mut segments = Vec::new();
        // Each pass takes one segment off: bounded by the text's length.
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix('.') {
                let end = after.find(['.', '[']).unwrap_or(after.len());
                let key = &after[..end];
                if key.is_empty() {
                    return Err(bad("a `.` needs a name"));
                }
                segments.push(Segment::Key(key.to_owned()));
                rest = &after[end..];
            } else if let Some(after) = rest.strip_prefix('[') {
                let end = after.find(']').ok_or_else(|| bad("a `[` needs its `]`"))?;
                let index = after[..end]
                    .parse()
                    .map_err(|_| bad("an index is a whole number"))?;
                segments.push(Segment::Index(index));
                rest = &after[end + 1..];
            } else {
                return Err(bad("segments are `.name` or `[index]`"));
            }
        }
        Ok(JsonPath { segments })
    }

    /// The value at the path, if there is one.
    pub fn get<'a>(&self, mut v: &'a Value) -> Option<&'a Value> {
        for s in &self.segments {
            v = match s {
                Segment::Key(k) => v.get(k)?,
                Segment::Index(i) => v.get(*i)?,
            };
        }
        Some(v)
    }

    /// The value at the path as a variable: a string as it is, anything
    /// else as JSON text.
    pub fn text(&self, v: &Value) -> Option<String> {
        self.get(v).map(|x| match x {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn paths_read_keys_and_indices() {
        let v: Value = serde_json::json!({"ids": [["a", "b"]], "n": {"k": 3}});
        let text = |p: &str| JsonPath::parse(p).unwrap().text(&v);
        assert_eq!(text("$.ids[0][1]").as_deref(), Some("b"));
        assert_eq!(text("$.n.k").as_deref(), Some("3"));
        assert_eq!(text("$.n").as_deref(), Some(r#"{"k":3}"#));
        assert_eq!(text("$.ids[5]"), None);
        assert_eq!(text("$"), Some(v.to_string()));
        for (bad, why) in [
            ("ids", "it starts with `$`"),
            ("$.", "a `.` needs a name"),
            ("$[x]", "an index is a whole number"),
            ("$[0", "a `[` needs its `]`"),
            ("$x", "segments are `.name` or `[index]`"),
        ] {
            assert_eq!(
                JsonPath::parse(bad).unwrap_err(),
                format!("`{bad}` is not a path like $.a.b[0] ({why})")
            );
        }
    }
}
