//! The alert rules in `deploy/prometheus/`: `promtool check rules` is clean and
//! `promtool test rules` passes its cases (a TTFT budget burn that pages and one that
//! does not, and one case for each other alert).

use std::process::{Command, Output};

use crate::support::{have, require, workspace_root};

fn promtool(args: &[&str]) -> Output {
    Command::new("promtool")
        .args(args)
        .current_dir(workspace_root().join("deploy/prometheus"))
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn promtool_checks_the_rules_and_their_unit_tests_pass() {
    if !require("promtool", have("promtool")) {
        return;
    }
    let check = promtool(&["check", "rules", "sluice-rules.yaml"]);
    let report = text(&check);
    assert!(check.status.success(), "{report}");
    assert!(report.contains("SUCCESS: 14 rules found"), "{report}");

    let test = promtool(&["test", "rules", "sluice-rules.test.yaml"]);
    let report = text(&test);
    assert!(test.status.success(), "{report}");
    assert!(report.contains("SUCCESS"), "{report}");
}

/// Each alert the issue names is in the file, and each has a unit test.
#[test]
fn every_alert_has_a_unit_test() {
    let dir = workspace_root().join("deploy/prometheus");
    let rules = std::fs::read_to_string(dir.join("sluice-rules.yaml")).unwrap();
    let tests = std::fs::read_to_string(dir.join("sluice-rules.test.yaml")).unwrap();
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert_eq!(
        alerts,
        [
            "SluiceTTFTBudgetBurnFast",
            "SluiceTTFTBudgetBurnSlow",
            "SluiceHighErrorRate",
            "SluiceRolloutRolledBack",
            "SluiceMirrorDropping",
            "SluiceCircuitBreakerOpen",
            "SluiceGpuMemoryHigh",
        ]
    );
    for alert in alerts {
        let case = format!("alertname: {alert}\n");
        assert!(tests.contains(&case), "no unit test for {alert}");
    }
}
