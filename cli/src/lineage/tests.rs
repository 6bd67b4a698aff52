#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

#[test]
fn a_scenario_sits_below_its_model_file_and_is_read_by_content() {
    let dir = std::env::temp_dir().join(format!("sluice-cli-lineage-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("model.yaml");
    std::fs::write(&model, "v: 1\narrival: { kind: exponential, rate: 2 }\n").unwrap();
    let scenario = dir.join("chat.yaml");
    std::fs::write(
        &scenario,
        "scenario: chat\nworkload: { from_model: model.yaml }\n",
    )
    .unwrap();
    let made = scenario_nodes(&scenario, Some("model.yaml")).unwrap();
    assert_eq!(made.len(), 2);
    assert_eq!(made[0].label, "model.yaml");
    assert_eq!(made[1].label, "chat.yaml");
    assert_eq!(made[1].parents, vec![made[0].id.clone()]);
    // Comments do not move either id; a changed model moves both.
    std::fs::write(
        &model,
        "# fitted\nv: 1\narrival: {rate: 2, kind: exponential}\n",
    )
    .unwrap();
    let again = scenario_nodes(&scenario, Some("model.yaml")).unwrap();
    assert_eq!(again, made);
    std::fs::write(&model, "v: 1\narrival: { kind: exponential, rate: 3 }\n").unwrap();
    let refit = scenario_nodes(&scenario, Some("model.yaml")).unwrap();
    assert_ne!(refit[0].id, made[0].id);
    assert_ne!(refit[1].id, made[1].id);
    let missing = scenario_nodes(&scenario, Some("gone.yaml")).unwrap_err();
    assert_eq!(
        format!("{missing:#}"),
        format!(
            "{}: No such file or directory (os error 2)",
            dir.join("gone.yaml").display()
        )
    );
    record(&dir.join("lineage"), &refit).unwrap();
    let (read, corrupt) = read_lineage_dir(&dir.join("lineage")).unwrap();
    assert_eq!((read.len(), corrupt.len()), (2, 0));
    std::fs::remove_dir_all(&dir).unwrap();
}
