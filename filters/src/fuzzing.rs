//! The invariants the fuzz targets in `fuzz/` check, one function per
//! target, each taking the fuzzer's raw bytes. They live here, not in the
//! fuzz crate, so that the ordinary `cargo test` on stable replays every
//! seed and every crash input through the same checks (`fuzzing/tests.rs`)
//! without nightly or libFuzzer. A check returns what it found wrong; the
//! fuzz target turns that into a crash. A panic inside a parser is a crash
//! on its own.
//!
//! Not part of the crate's API: hidden from the docs, and nothing in the
//! workspace calls it outside tests.

mod http;
mod meter;
mod resp;

pub use http::{fault_headers, head_scan, request_scan};
pub use meter::meter;
pub use resp::{resp_reply, resp_request};

/// What a check found: the invariant broken, with the values that broke it.
pub type Verdict = Result<(), String>;

/// `Err(message)` unless `ok`; the message is built only on failure.
pub fn ensure(ok: bool, message: impl FnOnce() -> String) -> Verdict {
    if ok {
        Ok(())
    } else {
        Err(message())
    }
}

/// Runs `check` over every file of `fuzz/corpus/<target>` and
/// `fuzz/regressions/<target>` under `fuzz` (the repository's `fuzz/`);
/// returns how many there were, or the first file that broke an
/// invariant. The one file reader in this crate: the crates' own tests
/// call it (filters, control, workload each replay their targets), so it
/// is written once here, where they all can reach it.
pub fn replay(
    fuzz: &std::path::Path,
    target: &str,
    check: fn(&[u8]) -> Verdict,
) -> Result<usize, String> {
    let mut n = 0;
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz.join(dir).join(target)) else {
            continue;
        };
        for entry in entries {
            let path = entry.map_err(|e| e.to_string())?.path();
            let data = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            check(&data).map_err(|e| format!("{}: {e}", path.display()))?;
            n += 1;
        }
    }
    Ok(n)
}

/// The fuzzer's bytes read as a small header and a body: a selector byte
/// (what to check: a dialect, limits), then up to three cut points of two
/// bytes each, then the body. Short inputs are all header, with an empty
/// body, so every input is usable. The seeds are the fixtures behind such a
/// header (see `fuzz/seed.sh`).
#[derive(Clone, Debug)]
pub struct Framed<'a> {
    pub selector: u8,
    /// Offsets into `body`, sorted, each in `0..=body.len()`.
    pub cuts: Vec<usize>,
    pub body: &'a [u8],
}

/// Bytes before the body: the selector and three two-byte cuts.
pub const HEADER_BYTES: usize = 7;

impl<'a> Framed<'a> {
    pub fn read(data: &'a [u8]) -> Framed<'a> {
        let (head, body) = data.split_at(data.len().min(HEADER_BYTES));
        let selector = head.first().copied().unwrap_or(0);
        let mut cuts: Vec<usize> = head
            .get(1..)
            .unwrap_or_default()
            .chunks_exact(2)
            .map(|pair| usize::from(u16::from_le_bytes([pair[0], pair[1]])) % (body.len() + 1))
            .collect();
        cuts.sort_unstable();
        Framed {
            selector,
            cuts,
            body,
        }
    }

    /// The body cut at `cuts`: the pieces, in order, some possibly empty.
    pub fn pieces(&self) -> Vec<&'a [u8]> {
        let mut pieces = Vec::with_capacity(self.cuts.len() + 1);
        let mut start = 0;
        for &cut in &self.cuts {
            pieces.push(self.body.get(start..cut).unwrap_or_default());
            start = cut;
        }
        pieces.push(self.body.get(start..).unwrap_or_default());
        pieces
    }
}

#[cfg(test)]
mod tests;
