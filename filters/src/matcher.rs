//! Route matching: path prefix, host and exact header values.

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
}

impl Matcher {
    pub fn matches(&self, req: &impl RequestView) -> bool {
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
    fn ipv6_host_keeps_brackets() {
        assert_eq!(strip_port("[::1]:80"), "[::1]");
        assert_eq!(strip_port("[::1]"), "[::1]");
        assert_eq!(strip_port("h"), "h");
    }
}
