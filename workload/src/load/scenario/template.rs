//! `{{var}}` templates: text with variables from the `data:` dictionaries.

use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Text(String),
    Var(String),
}

/// A parsed template (the default: empty).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

impl Template {
    /// Refuses a `{{` without its `}}` and an empty or non-word name.
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_owned()));
            }
            let after = &rest[open + 2..];
            let close = after
                .find("}}")
                .ok_or_else(|| format!("`{{{{` without `}}}}` in `{text}`"))?;
            let name = after[..close].trim();
            let word = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
            if !word {
                return Err(format!("`{{{{{name}}}}}` is not a variable name"));
            }
            parts.push(Part::Var(name.to_owned()));
            rest = &after[close + 2..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        Ok(Template { parts })
    }

    /// The variables it uses, in order.
    pub fn vars(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Var(v) => Some(v.as_str()),
            Part::Text(_) => None,
        })
    }

    /// With every variable replaced (validation made sure each exists; an
    /// absent one renders empty).
    pub fn render(&self, vars: &BTreeMap<String, String>) -> String {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Var(v) => out.push_str(vars.get(v).map_or("", String::as_str)),
            }
        }
        out
    }
}
