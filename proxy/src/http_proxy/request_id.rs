//! `x-request-id`: kept when the client sent a sane one, made otherwise.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use pingora::http::RequestHeader;

const HEADER: &str = "x-request-id";
const MAX_LEN: usize = 200;

/// Returns the request's id, inserting a fresh one into the request header
/// (so the upstream sees it) when it had none or an unusable one.
pub fn take_or_make(req: &mut RequestHeader) -> String {
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
    format!("{prefix:016x}-{n:08x}")
}
