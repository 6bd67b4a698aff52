//! Fits checked against known answers: seeded samples with true
//! parameters, recovered within a stated tolerance; bad traces refused with
//! their full error text; the model file read back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod bad_input;
mod model_file;
mod recovery;
mod windows;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::Distribution;

/// A file of `text` in a fresh temporary folder, and the folder.
fn temp_file(name: &str, text: &str) -> (PathBuf, PathBuf) {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "sluice-fit-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    (path, dir)
}

/// `n` draws of `d`, seeded.
fn draws(d: impl Distribution<f64>, n: usize, seed: u64) -> Vec<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| d.sample(&mut rng)).collect()
}

/// |got - want| <= tolerance × |want|.
#[track_caller]
fn near(what: &str, got: f64, want: f64, tolerance: f64) {
    eprintln!("{what}: {got} (true {want})");
    assert!(
        (got - want).abs() <= tolerance * want.abs(),
        "{what}: {got} is not within {}% of {want}",
        tolerance * 100.0
    );
}
