//! The Python interpreter with the test packages (the openai SDK), from the repo's venv,
//! and a way to run a script on it that answers in JSON.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The workspace root (the directory above the `tests` crate).
pub(crate) fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// A Python that can `import openai`: `$SLUICE_PYTHON` (set by `scripts/test.sh`), else
/// `.venv/bin/python` at the workspace root. `None` when neither works; checked once.
pub(crate) fn python() -> Option<PathBuf> {
    static PYTHON: OnceLock<Option<PathBuf>> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let from_env = std::env::var_os("SLUICE_PYTHON")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from);
            let venv = workspace_root().join(".venv/bin/python");
            from_env
                .into_iter()
                .chain([venv])
                .find(|p| imports_openai(p))
        })
        .clone()
}

fn imports_openai(python: &Path) -> bool {
    python.is_file()
        && Command::new(python)
            .args(["-c", "import openai"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// Runs `command` (a script on [`python`]) off the runtime, with loopback kept off any
/// proxy, and parses the JSON it prints; a run that prints anything else fails the test
/// with its status and both of its streams.
pub(crate) async fn run_json(mut command: Command) -> serde_json::Value {
    command.env("NO_PROXY", "127.0.0.1,localhost");
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("the script's task")
        .expect("run the script");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{e} ({}): stdout:\n{stdout}\nstderr:\n{stderr}",
            output.status
        )
    })
}
