//! `sluice ctl mirror set|off|diffs` against a running sluice.

use std::process::{Command, Output};

use super::config;
use crate::cli::sluice_bin;
use crate::harness::start;
use crate::support::NamedUpstream;

async fn ctl(sluice: &sluice_proxy::Sluice, args: &[&str]) -> Output {
    let mut cmd = Command::new(sluice_bin());
    cmd.arg("ctl")
        .args(["--url", &format!("http://{}", sluice.admin_addr)])
        .args(["--token", &sluice.token])
        .arg("mirror")
        .args(args);
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_sets_and_stops_a_mirror_and_shows_diffs() {
    let primary = NamedUpstream::start("primary").await.unwrap();
    let shadow = NamedUpstream::start("shadow").await.unwrap();
    let sluice = start(&config(
        primary.addr(),
        shadow.addr(),
        "{ cluster: shadow, percent: 0 }",
    ));

    let out = ctl(
        &sluice,
        &[
            "set",
            "chat",
            "--cluster",
            "shadow",
            "--percent",
            "50",
            "--copies",
            "2",
            "--sample-by",
            "x-session-id",
        ],
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let snapshot = sluice.store().load();
    let policy = snapshot.routes[0].mirror.as_ref().unwrap();
    assert_eq!(policy.config.percent, 50.0);
    assert_eq!(policy.config.copies, 2.0);
    assert_eq!(policy.config.sample_by.as_deref(), Some("x-session-id"));

    let out = ctl(&sluice, &["set", "chat", "--cluster", "nowhere"]).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("routes[0].mirror.cluster"), "{stderr}");
    assert!(stderr.contains("unknown cluster `nowhere`"), "{stderr}");

    let out = ctl(&sluice, &["diffs", "--json"]).await;
    assert!(out.status.success());
    let diffs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(diffs["total"], 0);

    let out = ctl(&sluice, &["off", "chat"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(sluice.store().load().routes[0].mirror.is_none());
}
