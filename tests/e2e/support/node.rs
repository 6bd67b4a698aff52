//! Node and the npm packages the tests drive sluice with (`scripts/install-deps.sh`
//! installs them, pinned, under `~/.cache/sluice/node`).

use std::path::PathBuf;

use super::have;

/// Where the tests' npm packages live: `SLUICE_NODE_MODULES`, else
/// `~/.cache/sluice/node/node_modules`.
pub(crate) fn node_modules() -> PathBuf {
    if let Some(dir) = std::env::var_os("SLUICE_NODE_MODULES") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".cache/sluice/node/node_modules")
}

/// Whether `node` runs and the npm package `name` is installed.
pub(crate) fn node_package_available(name: &str) -> bool {
    have("node") && node_modules().join(name).join("package.json").is_file()
}
