//! The state file as written: one versioned JSON document, read strictly
//! (unknown keys and other versions are refused, with the JSON path and the
//! line and column), written atomically (a temp file in the same directory,
//! fsync, rename, fsync of the directory), so that a `kill -9` at any point
//! leaves the old file or the new one, never half of one.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::{RawFault, RawRollout};
use crate::rollout::{RolloutEvent, State};

/// The file's name in `runtime.state_dir`.
pub(crate) const FILE_NAME: &str = "state.json";
/// Where a refused file is moved, for an operator to look at.
pub(crate) const REFUSED_NAME: &str = "state.json.refused";
const TEMP_NAME: &str = ".state.json.tmp";
/// The format this sluice writes and reads.
pub(crate) const VERSION: u32 = 1;

/// What was changed at run time, laid over the config at start.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StateFile {
    pub v: u32,
    /// Wall clock of the write, milliseconds since the Unix epoch.
    pub saved_ms: u64,
    /// The digest of the config the overlay was made on (the file as last
    /// loaded whole: at start, by a reload or `PUT /v1/config`).
    pub config_digest: String,
    /// Route name → its split, for the routes whose split is not the
    /// config's (set through the API or by a rollout).
    #[serde(default)]
    pub splits: BTreeMap<String, BTreeMap<String, u32>>,
    /// The live `faults:`, each with its absolute expiry.
    #[serde(default)]
    pub faults: Vec<SavedFault>,
    /// The live `rollouts:`: the config's and those posted through the API,
    /// less the finished ones.
    #[serde(default)]
    pub rollouts: Vec<RawRollout>,
    /// Every rollout's controller, running or finished.
    #[serde(default)]
    pub controllers: Vec<SavedController>,
}

/// One experiment of `faults:`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SavedFault {
    /// As written (its `ttl` the one it was given).
    pub spec: RawFault,
    /// When it stops firing, milliseconds since the Unix epoch.
    pub expires_ms: u64,
    /// `halt_if` stopped it.
    #[serde(default)]
    pub halted: bool,
}

/// One rollout controller's state.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SavedController {
    pub name: String,
    pub route: String,
    pub stable: String,
    pub canary: String,
    pub state: State,
    /// 1-based position in `steps` (0: not started).
    pub step: usize,
    /// The canary weight the rollout set last.
    pub weight: u32,
    /// Evaluations in a row with a breached gate.
    pub breaches: u32,
    /// Set once it finished and left `rollouts:`: its definition, so that
    /// the history still shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<RawRollout>,
    /// Its transitions, oldest first.
    #[serde(default)]
    pub events: Vec<RolloutEvent>,
}

/// Why a state file was not read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Not JSON (what serde_json said, with the line and column), or not
    /// the schema (the JSON path first).
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
}

impl StateFile {
    /// Reads `text` strictly. `path` names the file in errors.
    pub(crate) fn parse(path: &Path, text: &[u8]) -> Result<StateFile, ReadError> {
        let parse_error = |message: String| ReadError::Parse {
            path: path.to_path_buf(),
            message,
        };
        let de = &mut serde_json::Deserializer::from_slice(text);
        let state: StateFile = serde_path_to_error::deserialize(de).map_err(|e| {
            let at = e.path().to_string();
            let e = e.into_inner();
            match e.classify() {
                // Broken JSON has no path worth saying: the line and column say where.
                serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                    parse_error(format!("not JSON: {e}"))
                }
                _ if at == "." => parse_error(e.to_string()),
                _ => parse_error(format!("{at}: {e}")),
            }
        })?;
        if state.v != VERSION {
            return Err(parse_error(format!(
                "v: state format {} is not one this sluice reads (it reads {VERSION})",
                state.v
            )));
        }
        Ok(state)
    }

    /// Reads `dir/state.json`; `Ok(None)` when there is none.
    pub(crate) fn read(dir: &Path) -> Result<Option<StateFile>, ReadError> {
        let path = dir.join(FILE_NAME);
        match std::fs::read(&path) {
            Ok(bytes) => StateFile::parse(&path, &bytes).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ReadError::Io { path, source }),
        }
    }

    /// Writes `dir/state.json` atomically.
    pub(crate) fn write(&self, dir: &Path) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        write_atomic(dir, FILE_NAME, &bytes)
    }
}

/// `dir/name` replaced by `bytes` in one rename, the data and the rename
/// both on disk when it returns.
pub(crate) fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let temp = dir.join(TEMP_NAME);
    {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(&temp, dir.join(name))?;
    sync_dir(dir)
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir(_: &Path) -> std::io::Result<()> {
    Ok(())
}

/// Creates `dir` if needed and checks that a file can be written there
/// (the temp file the writes use, then removed).
pub(crate) fn prepare_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let temp = dir.join(TEMP_NAME);
    std::fs::File::create(&temp)?.sync_all()?;
    std::fs::remove_file(&temp)
}

/// A digest of a config as written (FNV-1a, 64 bits, of its JSON form):
/// tells whether the file changed since the overlay was made.
pub(crate) fn digest(raw: &crate::config::RawConfig) -> String {
    let bytes = serde_json::to_vec(raw).unwrap_or_default();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("fnv1a64:{hash:016x}")
}
