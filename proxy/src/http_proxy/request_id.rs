//! `x-request-id`: kept when the client sent a sane one, made otherwise.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use pingora::http::RequestHeader;

const HEADER: &str = "x-request-id";
const MAX_LEN: usize = 200;

/// Returns the request's id, inserting a fresh one into the request header
/// (so the upstream sees it) when it had none or an unusable one.
pub(super) fn take_or_make(req: &mut RequestHeader) -> String {
    if let Some(v) = req.headers.get(HEADER) {
        if let Ok(s) = v.to_str() {
            if !s.is_empty() && s.len() <= MAX_LEN {
                return s.to_string();
            }
        }
    }
    let id = fresh();
    let _ = req.insert_header(HEADER, id.as_str());
    id
}

/// A process-unique id: a random per-process prefix and a counter. Cheaper
/// than a UUID per request and just as unique for correlating logs.
fn fresh() -> String {
    static PREFIX: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let prefix = *PREFIX.get_or_init(rand::random);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // Hex by hand: `format!` costs several times more on every request.
    let mut id = String::with_capacity(25);
    push_hex(&mut id, prefix, 16);
    id.push('-');
    push_hex(&mut id, n, 8);
    id
}

/// The low `digits` hex digits of `value`, most significant first.
fn push_hex(out: &mut String, value: u64, digits: u32) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for i in (0..digits).rev() {
        out.push(char::from(HEX[((value >> (4 * i)) & 0xf) as usize]));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn fresh_ids_are_a_fixed_prefix_and_a_counter_in_hex() {
        let (a, b) = (fresh(), fresh());
        for id in [&a, &b] {
            assert_eq!(id.len(), 25, "{id}");
            let (prefix, n) = id.split_once('-').unwrap();
            assert_eq!((prefix.len(), n.len()), (16, 8), "{id}");
            assert!(u64::from_str_radix(prefix, 16).is_ok() && u64::from_str_radix(n, 16).is_ok());
        }
        assert_eq!(a[..16], b[..16]);
        let count = |id: &str| u64::from_str_radix(&id[17..], 16).unwrap();
        assert!(count(&b) > count(&a), "{a} {b}");
        let mut s = String::new();
        push_hex(&mut s, 0xab_0012, 8);
        assert_eq!(s, "00ab0012");
    }
}
