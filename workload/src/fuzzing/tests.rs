//! The seed corpus and the saved crash inputs of the `trace` and `scenario`
//! fuzz targets, replayed on stable with the ordinary tests.

use std::path::Path;

use super::*;

fn replay(target: &str, check: fn(&[u8]) -> Verdict) -> usize {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    sluice_filters::fuzzing::replay(&fuzz, target, check).unwrap()
}

#[test]
fn the_trace_corpus_and_regressions_hold() {
    assert!(replay("trace", trace) > 0);
}

#[test]
fn the_scenario_corpus_and_regressions_hold() {
    assert!(replay("scenario", scenario) > 0);
}
