//! Files the load-testing half writes and names: a result is written beside
//! its path and renamed over it, so a failure never leaves half a file; a
//! file's identity in lineage is the SHA-256 of its bytes.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};
use sluice_filters::{PathError, PathErrors};

/// `.NAME.partial` beside `path`: where a file is written before it is
/// renamed over `path`.
pub fn partial_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or("out".into(), |n| n.to_string_lossy());
    path.with_file_name(format!(".{name}.partial"))
}

/// Writes `bytes` to [`partial_path`] and renames it over `path`; on a
/// failure the partial file is removed (best effort) and `path` untouched.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let partial = partial_path(path);
    let written = std::fs::write(&partial, bytes).and_then(|()| std::fs::rename(&partial, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    written
}

/// A YAML (or JSON) document as `T`; a value that does not fit is one error
/// at its path (`workload.duration: invalid type ...`).
pub(crate) fn from_yaml<T: DeserializeOwned>(text: &str) -> Result<T, PathErrors> {
    let de = serde_norway::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        // serde_norway may prefix the path it already has.
        let message = match message.split_once(": ") {
            Some((head, rest)) if path.starts_with(head) && !head.is_empty() => rest.to_owned(),
            _ => message,
        };
        PathErrors(vec![PathError { path, message }])
    })
}

/// A file's text; a file that cannot be read is one error naming it.
pub(crate) fn read_text(path: &Path) -> Result<String, PathErrors> {
    std::fs::read_to_string(path).map_err(|e| {
        PathErrors(vec![PathError {
            path: String::new(),
            message: format!("{}: {e}", path.display()),
        }])
    })
}

/// The SHA-256 of the file's bytes, lower-case hex, read in 64 KiB blocks.
pub fn sha256_file(path: &Path) -> io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        match file.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buffer[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_renamed_whole_and_hashed_by_its_bytes() {
        let dir = std::env::temp_dir().join(format!("sluice-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("run.json");
        assert_eq!(partial_path(&path), dir.join(".run.json.partial"));
        write_atomically(&path, b"abc").unwrap();
        assert!(!partial_path(&path).exists());
        // The published SHA-256 of "abc" (FIPS 180-2, appendix B.1).
        assert_eq!(
            sha256_file(&path).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        // Into a folder that does not exist: an error, and nothing left.
        let nowhere = dir.join("missing").join("run.json");
        assert!(write_atomically(&nowhere, b"x").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
