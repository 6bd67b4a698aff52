//! The admin bearer token: where it comes from and how a request's is checked.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read};
use std::time::{SystemTime, UNIX_EPOCH};

use http::header::AUTHORIZATION;
use http::HeaderMap;
use subtle::ConstantTimeEq;

use crate::config::TokenSource;

/// Resolves the configured token. The flag is true when the token was
/// generated (the caller prints it, since nobody else knows it).
pub(crate) fn resolve_token(source: &TokenSource) -> io::Result<(String, bool)> {
    match source {
        TokenSource::Env(name) => {
            let value = std::env::var(name).map_err(|e| {
                let kind = match e {
                    std::env::VarError::NotPresent => io::ErrorKind::NotFound,
                    std::env::VarError::NotUnicode(_) => io::ErrorKind::InvalidData,
                };
                io::Error::new(kind, format!("admin token variable `{name}`: {e}"))
            })?;
            non_empty(value.trim(), || format!("admin token variable `{name}`"))
        }
        TokenSource::File(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("admin token file {}: {e}", path.display()),
                )
            })?;
            non_empty(text.trim(), || {
                format!("admin token file {}", path.display())
            })
        }
        TokenSource::Generated => Ok((generate(), true)),
    }
}

fn non_empty(token: &str, what: impl FnOnce() -> String) -> io::Result<(String, bool)> {
    if token.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is empty", what()),
        ));
    }
    Ok((token.to_string(), false))
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

/// True when the request carries `Authorization: Bearer <expected>`. The
/// comparison takes the same time for every token of the expected length.
pub(super) fn bearer_matches(headers: &HeaderMap, expected: &str) -> bool {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return false;
    };
    let value = value.as_bytes();
    let scheme = b"bearer ";
    if value.len() < scheme.len() || !value[..scheme.len()].eq_ignore_ascii_case(scheme) {
        return false;
    }
    let given = value[scheme.len()..].trim_ascii();
    // An empty configured token would match an empty header: refuse it.
    !expected.is_empty() && bool::from(given.ct_eq(expected.as_bytes()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn tokens_come_from_env_file_or_are_generated() {
        let var = format!("SLUICE_TEST_TOKEN_{}", std::process::id());
        let missing = resolve_token(&TokenSource::Env(var.clone())).unwrap_err();
        assert!(missing.to_string().contains(&var), "{missing}");
        std::env::set_var(&var, "");
        let empty = resolve_token(&TokenSource::Env(var.clone())).unwrap_err();
        assert_eq!(
            empty.to_string(),
            format!("admin token variable `{var}` is empty")
        );
        std::env::set_var(&var, "from-env");
        assert_eq!(
            resolve_token(&TokenSource::Env(var.clone())).unwrap(),
            ("from-env".to_string(), false)
        );
        std::env::remove_var(&var);

        let path = std::env::temp_dir().join(format!("sluice-token-{}", std::process::id()));
        let missing = resolve_token(&TokenSource::File(path.clone())).unwrap_err();
        assert!(missing.to_string().contains(&path.display().to_string()));
        std::fs::write(&path, "from-file\n").unwrap();
        assert_eq!(
            resolve_token(&TokenSource::File(path.clone())).unwrap(),
            ("from-file".to_string(), false)
        );
        std::fs::remove_file(&path).unwrap();

        let (a, generated) = resolve_token(&TokenSource::Generated).unwrap();
        let (b, _) = resolve_token(&TokenSource::Generated).unwrap();
        assert!(generated);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
