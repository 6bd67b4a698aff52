//! The artefact files: one `<id>.json` per artefact in a directory
//! (`.sluice/lineage` by default), each written atomically. A file that
//! does not read as an artefact is reported with where it broke and
//! skipped, so one bad file does not hide the rest of the graph.

use std::io;
use std::path::{Path, PathBuf};

use sluice_filters::Artifact;

use crate::files::write_atomically;

/// Where artefacts are kept, relative to the current directory.
pub const LINEAGE_DIR: &str = ".sluice/lineage";
/// The variable that moves it (a flag wins over it).
pub const LINEAGE_DIR_ENV: &str = "SLUICE_LINEAGE_DIR";

/// Writes `artifact` as `DIR/<id>.json` (the directory made if needed),
/// returning the path. The same id holds the same inputs, so writing it
/// again only refreshes its attributes.
pub fn write_artifact(dir: &Path, artifact: &Artifact) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{}.json", artifact.id));
    let bytes = serde_json::to_vec_pretty(artifact).map_err(io::Error::other)?;
    write_atomically(&path, &bytes)?;
    Ok(path)
}

/// A file in the directory that is not an artefact.
#[derive(Clone, Debug, PartialEq)]
pub struct Corrupt {
    pub path: PathBuf,
    /// What is wrong and where: `line 3 column 9: expected ...`.
    pub error: String,
}

impl std::fmt::Display for Corrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.error)
    }
}

/// Every `*.json` artefact in `dir`, in file-name order, and the files that
/// are not artefacts. A missing directory holds none.
pub fn read_dir(dir: &Path) -> io::Result<(Vec<Artifact>, Vec<Corrupt>)> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
        Err(e) => return Err(e),
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let mut found = Vec::new();
    let mut corrupt = Vec::new();
    for path in paths {
        let text = std::fs::read(&path)?;
        match read_artifact(&text) {
            Ok(a) => found.push(a),
            Err(error) => corrupt.push(Corrupt { path, error }),
        }
    }
    Ok((found, corrupt))
}

/// One artefact file's bytes; the error says where it broke.
fn read_artifact(text: &[u8]) -> Result<Artifact, String> {
    let mut de = serde_json::Deserializer::from_slice(text);
    let artifact: Artifact = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let (line, column) = (inner.line(), inner.column());
        // serde_json ends its message with the place; it is said first here.
        let message = inner.to_string();
        let message = message
            .rsplit_once(" at line ")
            .map_or(message.as_str(), |(m, _)| m)
            .to_owned();
        match path.as_str() {
            "." | "" => format!("line {line} column {column}: {message}"),
            _ => format!("line {line} column {column}: {path}: {message}"),
        }
    })?;
    de.end().map_err(|e| {
        format!(
            "line {} column {}: trailing characters",
            e.line(),
            e.column()
        )
    })?;
    // An edited file would otherwise pass for what it no longer is.
    let again = Artifact::new(
        artifact.kind,
        artifact.label.clone(),
        artifact.inputs.clone(),
        artifact.parents.clone(),
    );
    if again.id != artifact.id {
        return Err(format!(
            "id {} is not the id of its kind, inputs and parents ({})",
            artifact.id, again.id
        ));
    }
    Ok(artifact)
}
