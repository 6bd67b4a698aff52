//! The CI share of the soak (issue 19): 3 minutes of the debug `sluice`
//! binary under mixed traffic and churn, the goals checked after a minute
//! of warm-up. `benches/soak.sh --minutes 30` runs the long one.

#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sluice_benches::soak::{self, SoakPlan};

/// The `sluice` binary of this build's profile, built if missing.
fn sluice_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // The test binary is `<target>/<profile>/deps/soak-*`.
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("under <target>/<profile>/deps");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let built = Command::new(cargo)
        .current_dir(root)
        .env(
            "CARGO_TARGET_DIR",
            profile.parent().expect("the target dir"),
        )
        .args(["build", "-p", "sluice-cli", "--bin", "sluice", "--quiet"])
        .status()
        .expect("cargo build");
    assert!(built.success());
    profile.join("sluice")
}

#[test]
fn three_minutes_of_mixed_traffic_and_churn_leave_no_error_and_flat_rss_fds_and_tasks() {
    let plan = SoakPlan {
        duration: Duration::from_secs(180),
        sample_every: Duration::from_secs(10),
        warm_up: Duration::from_secs(60),
        sluice: sluice_bin(),
        max_body: 16 << 10,
        concurrency: 8,
        // Three minutes are not past the warm-up the 5% goal of the long
        // soak presumes: RSS still climbs here (about 2 MiB a minute in the
        // debug build, the recorder off or on; see docs/reliability.md), and
        // 5% between the halves is met by some runs and not others. CI
        // holds a leak of the fast kind to 10%; `benches/soak.sh` holds 5%.
        max_rss_growth: 0.10,
    };
    let soak = soak::run(&plan, &|s| {
        eprintln!("soak: {:.0} s, {s:?}", s.seconds);
    })
    .expect("the soak starts");
    let report = soak::report(&plan, &soak);
    eprint!("{report}");
    assert_eq!(soak.missed(&plan), Vec::<String>::new(), "{report}");
    assert!(soak.ok > 1_000, "{report}");
    assert!(soak.recorded_lines > 1_000, "{report}");
    assert_eq!(soak.samples.len(), 18, "{report}");
    // Each runtime reported its tasks in every sample.
    assert!(soak.samples.iter().all(|s| s.tasks.len() == 3), "{report}");
}
