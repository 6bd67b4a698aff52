//! The invariants the `config` fuzz target in `fuzz/` checks, here so that
//! the ordinary tests replay its corpus and regressions on stable (see
//! `sluice_filters::fuzzing`). Not API.

use sluice_filters::fuzzing::{ensure, Verdict};

use crate::config::RawConfig;

/// A config file or API body: reading it never panics; an error says what
/// and where; what was read writes out as YAML that reads back to the same
/// YAML (what `GET /v1/config` → `PUT /v1/config` relies on), and
/// validates the same way.
pub fn config(data: &[u8]) -> Verdict {
    let Ok(text) = std::str::from_utf8(data) else {
        return Ok(());
    };
    let raw = match RawConfig::from_yaml(text) {
        Ok(raw) => raw,
        Err(errors) => {
            return ensure(
                errors.0.iter().all(|e| !e.message.is_empty()) && !errors.0.is_empty(),
                || format!("an error without a message: {errors:?}"),
            )
        }
    };
    let yaml = raw.to_yaml();
    let again = RawConfig::from_yaml(&yaml)
        .map_err(|e| format!("the config written as {yaml:?} does not read back: {e}"))?;
    let twice = again.to_yaml();
    ensure(twice == yaml, || {
        format!("written {yaml:?}, read and written again {twice:?}")
    })?;
    match (raw.validate(), again.validate()) {
        (Ok(_), Ok(_)) => Ok(()),
        (Err(first), Err(second)) => {
            ensure(
                !first.0.is_empty() && first.0.iter().all(|e| !e.message.is_empty()),
                || format!("an error without a message: {first:?}"),
            )?;
            ensure(first == second, || {
                format!("validated as {first}, after a round trip as {second}")
            })
        }
        (first, second) => Err(format!(
            "validation changed over a round trip through {yaml:?}: {:?} then {:?}",
            first.err(),
            second.err()
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn the_config_corpus_and_regressions_hold() {
        let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
        let n = sluice_filters::fuzzing::replay(&fuzz, "config", config).unwrap();
        assert!(n >= 8, "{n} inputs");
    }
}
