//! Versions as plans read them: semantic versions with a leading `v`
//! allowed and missing parts 0 (`v2` is 2.0.0). A pre-release or build
//! suffix (`-rc.1`, `+sha`) is kept for display and does not size a change.

use std::fmt;
use std::str::FromStr;

use super::Change;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Semver {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    /// What followed `-` or `+`, as written.
    pub suffix: String,
}

impl FromStr for Semver {
    type Err = String;

    fn from_str(text: &str) -> Result<Semver, String> {
        let bad = || {
            format!(
                "`{text}` is not a semantic version (MAJOR[.MINOR[.PATCH]], a leading `v` \
                 allowed, e.g. v1.4.2)"
            )
        };
        let body = text
            .strip_prefix('v')
            .or_else(|| text.strip_prefix('V'))
            .unwrap_or(text);
        let cut = body.find(['-', '+']).unwrap_or(body.len());
        let (numbers, suffix) = body.split_at(cut);
        if suffix == "-" || suffix == "+" {
            return Err(bad());
        }
        let mut parts = [0u64; 3];
        for (i, part) in numbers.split('.').enumerate() {
            let slot = parts.get_mut(i).ok_or_else(bad)?;
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            *slot = part.parse().map_err(|_| bad())?;
        }
        let [major, minor, patch] = parts;
        Ok(Semver {
            major,
            minor,
            patch,
            suffix: suffix.to_owned(),
        })
    }
}

impl fmt::Display for Semver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{}.{}{}",
            self.major, self.minor, self.patch, self.suffix
        )
    }
}

impl Semver {
    /// The size of the change from `self` to `to`: the first part that
    /// differs, in either direction (a rollback to 1.x from 2.x is as
    /// big a change as the release was). Equal versions, or ones that
    /// differ only in their suffix, are a patch.
    pub fn change_to(&self, to: &Semver) -> Change {
        if self.major != to.major {
            Change::Major
        } else if self.minor != to.minor {
            Change::Minor
        } else {
            Change::Patch
        }
    }
}
