//! The API's tokens: each a name, a scope and a secret; read from their
//! sources (a variable, a secret file, a token file of several lines), and
//! the one a request carries found by constant-time comparison.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::io::Read;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use http::header::AUTHORIZATION;
use http::HeaderMap;
use subtle::ConstantTimeEq;

use crate::config::{Scope, TokenSource};

/// The name `token_env`, a bare `token_file` and a generated token have.
pub(crate) const DEFAULT_NAME: &str = "default";

pub(crate) struct Token {
    pub name: String,
    pub scope: Scope,
    secret: String,
}

impl Token {
    pub(crate) fn new(name: impl Into<String>, scope: Scope, secret: impl Into<String>) -> Token {
        Token {
            name: name.into(),
            scope,
            secret: secret.into(),
        }
    }
}

// Written by hand so that a log line or a panic never shows a secret.
impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token({} {})", self.name, self.scope)
    }
}

/// A set of tokens with distinct names and distinct secrets.
#[derive(Debug, Default)]
pub(crate) struct Tokens(Vec<Token>);

/// What a request's `Authorization` header says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Presented<'a> {
    Missing,
    Wrong,
    Known(&'a str, Scope),
}

impl Tokens {
    pub(crate) fn new(tokens: Vec<Token>) -> Result<Tokens, String> {
        let mut names: HashMap<&str, usize> = HashMap::new();
        let mut secrets: HashMap<&str, &str> = HashMap::new();
        for t in &tokens {
            if names.insert(&t.name, 0).is_some() {
                return Err(format!("duplicate token name `{}`", t.name));
            }
            if let Some(first) = secrets.insert(&t.secret, &t.name) {
                return Err(format!(
                    "tokens `{first}` and `{}` have the same secret",
                    t.name
                ));
            }
        }
        Ok(Tokens(tokens))
    }

    /// The token the request carries. Every token is compared, each in
    /// constant time, so the time taken tells neither a secret's bytes nor
    /// which token matched.
    pub(crate) fn find(&self, headers: &HeaderMap) -> Presented<'_> {
        let Some(given) = bearer(headers) else {
            return Presented::Missing;
        };
        let mut found = None;
        for t in &self.0 {
            // An empty secret would match an empty header: never one.
            let matches = !t.secret.is_empty() && bool::from(given.ct_eq(t.secret.as_bytes()));
            if matches {
                found = Some(t);
            }
        }
        match found {
            Some(t) => Presented::Known(&t.name, t.scope),
            None => Presented::Wrong,
        }
    }

    /// The first `admin` token's secret: what the handle gives the process
    /// that started sluice (and prints when generated).
    pub(crate) fn first_admin(&self) -> Option<&str> {
        let admin = self.0.iter().find(|t| t.scope == Scope::Admin);
        admin.map(|t| t.secret.as_str())
    }

    pub(crate) fn names(&self) -> Vec<&str> {
        self.0.iter().map(|t| t.name.as_str()).collect()
    }
}

/// The bearer token of `Authorization: Bearer <token>`, if the header is one.
fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let value = headers.get(AUTHORIZATION)?.as_bytes();
    let scheme = b"bearer ";
    if value.len() < scheme.len() || !value[..scheme.len()].eq_ignore_ascii_case(scheme) {
        return None;
    }
    Some(value[scheme.len()..].trim_ascii())
}

/// Reads every source into one set; `None` sources: one generated `admin`
/// token (the flag says so, since only the caller can tell anybody).
pub(crate) fn load(sources: &[TokenSource]) -> Result<(Tokens, bool), String> {
    if sources.is_empty() {
        let generated = Token::new(DEFAULT_NAME, Scope::Admin, generate());
        return Ok((Tokens::new(vec![generated])?, true));
    }
    let mut tokens = Vec::new();
    for source in sources {
        match source {
            TokenSource::Env { name, scope, var } => {
                let value =
                    std::env::var(var).map_err(|e| format!("admin token variable `{var}`: {e}"))?;
                let secret = non_empty(value.trim(), || format!("admin token variable `{var}`"))?;
                tokens.push(Token::new(name, *scope, secret));
            }
            TokenSource::Secret { name, scope, path } => {
                let text = read(path)?;
                let secret = non_empty(text.trim(), || {
                    format!("admin token file {}", path.display())
                })?;
                tokens.push(Token::new(name, *scope, secret));
            }
            TokenSource::File(path) => {
                let parsed = parse_token_file(&read(path)?)
                    .map_err(|e| format!("admin token file {}: {e}", path.display()))?;
                tokens.extend(parsed);
            }
        }
    }
    Ok((Tokens::new(tokens)?, false))
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("admin token file {}: {e}", path.display()))
}

fn non_empty(token: &str, what: impl FnOnce() -> String) -> Result<String, String> {
    match token.is_empty() {
        true => Err(format!("{} is empty", what())),
        false => Ok(token.to_string()),
    }
}

/// A token file: one bare token (named `default`, scope `admin`, the form
/// `token_file` always had), or lines `name scope token`. Blank lines and
/// lines starting with `#` are skipped.
pub(crate) fn parse_token_file(text: &str) -> Result<Vec<Token>, String> {
    let lines: Vec<(usize, Vec<&str>)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        .map(|(n, l)| (n, l.split_whitespace().collect()))
        .collect();
    if let [(_, fields)] = lines.as_slice() {
        if let [secret] = fields.as_slice() {
            return Ok(vec![Token::new(DEFAULT_NAME, Scope::Admin, *secret)]);
        }
    }
    if lines.is_empty() {
        return Err("no tokens".into());
    }
    let mut tokens = Vec::new();
    for (n, fields) in lines {
        let [name, scope, secret] = fields.as_slice() else {
            return Err(format!(
                "line {n}: expected `name scope token`, found {} fields",
                fields.len()
            ));
        };
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(format!(
                "line {n}: `{name}` is not a valid name (letters, digits, `-`, `_`, `.`)"
            ));
        }
        let scope = Scope::parse(scope).map_err(|e| format!("line {n}: {e}"))?;
        tokens.push(Token::new(*name, scope, *secret));
    }
    Ok(tokens)
}

/// 32 hex characters from the OS's random source. Where /dev/urandom cannot
/// be read, std's randomly keyed hasher over the time and pid stands in.
fn generate() -> String {
    let mut bytes = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        for (i, chunk) in bytes.chunks_mut(8).enumerate() {
            let mut h = RandomState::new().build_hasher();
            h.write_u128(nanos);
            h.write_u32(std::process::id());
            h.write_usize(i);
            chunk.copy_from_slice(&h.finish().to_le_bytes());
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
