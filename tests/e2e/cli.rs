//! The real `sluice` binary's `validate` command against the example configs and a
//! broken one, and the same configs through `Config::from_yaml` in-process. Also owns
//! [`sluice_bin`], which the other binary-driving tests use.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use sluice_control::Config;

use crate::support::{workspace_root, TempDir};

/// The `sluice` binary of this build profile, built once per test run. Cargo does not
/// build another package's binaries for a test, and `CARGO_BIN_EXE_*` only names the
/// test's own package's, so this runs `cargo build` for it (a no-op when up to date).
pub(crate) fn sluice_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        // The test binary is `<target>/<profile>/deps/e2e-*`.
        let exe = std::env::current_exe().expect("current_exe");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("test binary under <target>/<profile>/deps")
            .to_path_buf();
        let target_dir = profile_dir.parent().expect("profile dir has a parent");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut build = Command::new(cargo);
        build
            .current_dir(workspace_root())
            .args(["build", "-p", "sluice-cli", "--bin", "sluice", "--quiet"])
            .arg("--target-dir")
            .arg(target_dir);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        let status = build
            .status()
            .expect("run cargo build for the sluice binary");
        assert!(status.success(), "cargo build of the sluice binary failed");
        let built = profile_dir.join("sluice");
        assert!(
            built.is_file(),
            "{} missing after the build",
            built.display()
        );
        // A copy named for this checkout: worktrees that share one target
        // dir all link `<profile>/sluice`, and another's build must not
        // swap the binary under this run's tests.
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        std::hash::Hash::hash(&workspace_root(), &mut hasher);
        let own = profile_dir.join(format!(
            "sluice-e2e-{:016x}",
            std::hash::Hasher::finish(&hasher)
        ));
        // Copied beside and renamed over, so a binary still running from
        // an earlier run is never written to ("text file busy").
        let part = own.with_extension(format!("{}", std::process::id()));
        std::fs::copy(&built, &part).expect("copy the sluice binary");
        std::fs::rename(&part, &own).expect("rename the sluice binary copy");
        own
    })
    .clone()
}

/// `sluice ARGS...`, run to completion off the async runtime's threads. The
/// lineage artefacts it makes go to a scratch directory, not the checkout,
/// unless `--lineage-dir` says where.
pub(crate) async fn sluice(args: Vec<String>) -> Output {
    let lineage = std::env::temp_dir().join(format!("sluice-e2e-lineage-{}", std::process::id()));
    tokio::task::spawn_blocking(move || {
        Command::new(sluice_bin())
            .args(&args)
            .env("SLUICE_LINEAGE_DIR", lineage)
            .output()
    })
    .await
    .unwrap()
    .expect("run sluice")
}

fn example_configs() -> Vec<PathBuf> {
    let dir = workspace_root().join("configs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "expected at least 3 configs: {files:?}");
    files
}

fn lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_example_config_parses_in_process() {
    for file in example_configs() {
        let text = std::fs::read_to_string(&file).unwrap();
        if let Err(e) = Config::from_yaml(&text) {
            panic!("{}:\n{e}", file.display());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_accepts_every_example_config() {
    for file in example_configs() {
        let config = Config::from_yaml(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let out = sluice(vec!["validate".into(), file.display().to_string()]).await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
        let expected = format!(
            "{}: valid ({} listeners, {} clusters, {} routes)",
            file.display(),
            config.listeners.len(),
            config.clusters.len(),
            config.routes.len()
        );
        assert_eq!(lines(&out.stdout), vec![expected], "{stderr}");
    }
}

const TWO_ERRORS: &str = "\
runtime: { threads: 1, grace_period: 5sec }
admin: { listen: 127.0.0.1:9901 }
listeners:
  - { name: public, listen: 127.0.0.1:8080, protocol: http }
clusters:
  - { name: stable, kind: llm, endpoints: [127.0.0.1:8000] }
routes:
  - { name: chat, listener: public, split: { stable: 90, nope: 10 } }
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_prints_every_error_with_its_path() {
    let expected = vec![
        "runtime.grace_period: `5sec` has unknown unit `sec` (use us, ms, s, m or h)".to_owned(),
        "routes[0].split.nope: unknown cluster `nope`".to_owned(),
    ];
    let in_process = Config::from_yaml(TWO_ERRORS).unwrap_err();
    let in_process: Vec<String> = in_process.0.iter().map(ToString::to_string).collect();
    assert_eq!(in_process, expected);

    let dir = TempDir::new("validate");
    let file = dir.write("bad.yaml", TWO_ERRORS);
    let out = sluice(vec!["validate".into(), file.display().to_string()]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(lines(&out.stderr), expected);
    assert!(lines(&out.stdout).is_empty(), "{out:?}");

    // A shape error (unknown key) reads exactly as the library reports it.
    let unknown_key = TWO_ERRORS.replace("protocol: http", "protocol: http, tls: yes");
    let expected = "listeners[0].tls: unknown field `tls`, expected one of `name`, `listen`, \
                    `protocol`, `cert`, `key`, `h2c`, `cluster`, `limits` at line 4 column 61";
    let in_process = Config::from_yaml(&unknown_key).unwrap_err().to_string();
    assert_eq!(in_process, expected);
    let file = dir.write("unknown.yaml", &unknown_key);
    let out = sluice(vec!["validate".into(), file.display().to_string()]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(lines(&out.stderr), vec![expected.to_owned()]);

    // A file that is not there is an error with its path, not a crash.
    let missing = dir.path().join("missing.yaml");
    let out = sluice(vec!["validate".into(), missing.display().to_string()]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = lines(&out.stderr);
    assert_eq!(stderr.len(), 1, "{stderr:?}");
    assert!(
        stderr[0].starts_with(&format!("{}: ", missing.display())),
        "{stderr:?}"
    );
}
