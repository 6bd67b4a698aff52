//! Route matching: path prefix, host, exact header values and a glob on the model.

/// The parts of a request a route can match on. The proxy implements this
/// over pingora's request header; [`RequestParts`] over plain values.
pub trait RequestView {
    fn path(&self) -> &str;
    /// The authority without its port, as sent (`Host` or `:authority`).
    fn host(&self) -> Option<&str>;
    fn header(&self, name: &str) -> Option<&[u8]>;
}

/// A request given by its parts, for callers that hold no server request: the
/// tests and benches of routing and faults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestParts<'a> {
    pub path: &'a str,
    pub host: Option<&'a str>,
    /// `(name, value)` pairs, names lower-case as the matcher asks for them.
    pub headers: &'a [(&'a str, &'a str)],
}

impl<'a> RequestParts<'a> {
    /// A request to `path` with `headers` and no host.
    pub const fn new(path: &'a str, headers: &'a [(&'a str, &'a str)]) -> Self {
        RequestParts {
            path,
            host: None,
            headers,
        }
    }
}

impl RequestView for RequestParts<'_> {
    fn path(&self) -> &str {
        self.path
    }
    fn host(&self) -> Option<&str> {
        self.host
    }
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_bytes())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderMatch {
    /// Lower-case header name.
    pub name: String,
    pub value: String,
}

/// A route's `match` block. Every condition that is set must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Matcher {
    pub path_prefix: Option<String>,
    /// Lower-case host name without port.
    pub host: Option<String>,
    pub headers: Vec<HeaderMatch>,
    /// A glob on the request's model (`gpt-*`); a request that names no
    /// model does not match it.
    pub model: Option<ModelGlob>,
}

impl Matcher {
    /// Whether `req` matches, its model unknown: a matcher with a `model`
    /// condition does not.
    pub fn matches(&self, req: &impl RequestView) -> bool {
        self.matches_with_model(req, None)
    }

    /// Whether `req`, naming `model` (body or model header), matches.
    pub fn matches_with_model(&self, req: &impl RequestView, model: Option<&str>) -> bool {
        if let Some(glob) = &self.model {
            if !model.is_some_and(|m| glob.matches(m)) {
                return false;
            }
        }
        if let Some(prefix) = &self.path_prefix {
            if !req.path().starts_with(prefix.as_str()) {
                return false;
            }
        }
        if let Some(host) = &self.host {
            match req.host() {
                Some(h) if strip_port(h).eq_ignore_ascii_case(host) => {}
                _ => return false,
            }
        }
        self.headers
            .iter()
            .all(|m| req.header(&m.name) == Some(m.value.as_bytes()))
    }
}

/// A model name pattern: `*` stands for any run of characters (none too),
/// every other character for itself, case-sensitive as model ids are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelGlob(String);

impl ModelGlob {
    pub fn new(pattern: &str) -> Self {
        ModelGlob(pattern.to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn matches(&self, model: &str) -> bool {
        let mut parts = self.0.split('*');
        // `split` yields at least one part; without a `*` the glob is a literal.
        let first = parts.next().unwrap_or("");
        let Some(mut rest) = model.strip_prefix(first) else {
            return false;
        };
        let mut parts = parts.peekable();
        if parts.peek().is_none() {
            return rest.is_empty();
        }
        while let Some(part) = parts.next() {
            if parts.peek().is_none() {
                // The last part is anchored at the end.
                return rest.len() >= part.len() && rest.ends_with(part);
            }
            match rest.find(part) {
                Some(i) => rest = &rest[i + part.len()..],
                None => return false,
            }
        }
        true
    }
}

/// `example.com:8080` → `example.com`; `[::1]:80` → `[::1]`.
fn strip_port(host: &str) -> &str {
    match host.rfind(':') {
        Some(i) if !host[i..].contains(']') => &host[..i],
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TENANT_A: &[(&str, &str)] = &[("x-tenant", "a")];

    fn req(path: &'static str, host: Option<&'static str>) -> RequestParts<'static> {
        RequestParts {
            path,
            host,
            headers: TENANT_A,
        }
    }

    #[test]
    fn empty_matcher_matches_everything() {
        assert!(Matcher::default().matches(&req("/", None)));
    }

    #[test]
    fn path_host_and_headers_all_must_hold() {
        let m = Matcher {
            path_prefix: Some("/v1/".into()),
            host: Some("api.example".into()),
            headers: vec![HeaderMatch {
                name: "x-tenant".into(),
                value: "a".into(),
            }],
            model: None,
        };
        assert!(m.matches(&req("/v1/chat", Some("API.example:8080"))));
        assert!(!m.matches(&req("/v2/chat", Some("api.example"))));
        assert!(!m.matches(&req("/v1/chat", Some("other"))));
        assert!(!m.matches(&req("/v1/chat", None)));
        let mut r = req("/v1/chat", Some("api.example"));
        r.headers = &[("x-tenant", "b")];
        assert!(!m.matches(&r));
    }

    #[test]
    fn model_globs() {
        let cases = [
            ("gpt-*", "gpt-4o", true),
            ("gpt-*", "gpt-", true),
            ("gpt-*", "llama-3", false),
            ("gpt-*", "xgpt-4", false),
            ("*-mini", "gpt-4o-mini", true),
            ("*-mini", "gpt-4o-mini-2", false),
            ("llama-*-instruct", "llama-3.1-8b-instruct", true),
            ("llama-*-instruct", "llama-instruct", false),
            ("a*b*c", "abc", true),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "acb", false),
            ("*", "", true),
            ("exact", "exact", true),
            ("exact", "exactly", false),
            ("a**", "a", true),
            ("ab*ba", "aba", false),
        ];
        for (glob, model, want) in cases {
            assert_eq!(
                ModelGlob::new(glob).matches(model),
                want,
                "{glob} vs {model}"
            );
        }
    }

    #[test]
    fn model_condition_needs_a_model() {
        let m = Matcher {
            model: Some(ModelGlob::new("gpt-*")),
            ..Matcher::default()
        };
        let r = req("/v1/chat", None);
        assert!(!m.matches(&r));
        assert!(!m.matches_with_model(&r, Some("llama-3")));
        assert!(m.matches_with_model(&r, Some("gpt-4o")));
    }

    #[test]
    fn ipv6_host_keeps_brackets() {
        assert_eq!(strip_port("[::1]:80"), "[::1]");
        assert_eq!(strip_port("[::1]"), "[::1]");
        assert_eq!(strip_port("h"), "h");
    }
}
