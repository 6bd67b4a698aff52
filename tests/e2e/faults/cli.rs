//! `sluice ctl fault add|list|show|rm` against a running sluice.

use std::process::Output;

use serde_json::Value;

use super::yaml;
use crate::cli::sluice;
use crate::harness::{listener, start};
use crate::support::NamedUpstream;

async fn ctl(admin: &str, token: &str, args: &[&str]) -> Output {
    let mut all = vec![
        "ctl".to_string(),
        "--url".into(),
        format!("http://{admin}"),
        "--token".into(),
        token.to_string(),
        "--json".into(),
        "fault".into(),
    ];
    all.extend(args.iter().map(|a| a.to_string()));
    sluice(all).await
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_fault_adds_lists_shows_and_removes() {
    let up = NamedUpstream::start("a").await.unwrap();
    let sluice_ = start(&yaml(&up, false));
    let admin = sluice_.admin_addr.to_string();
    let token = sluice_.token.clone();
    let added = json_of(
        &ctl(
            &admin,
            &token,
            &[
                "add",
                "--id",
                "teapot",
                "--ttl",
                "1m",
                "--route",
                "chat",
                "--action",
                "abort",
                "--param",
                "status=418",
            ],
        )
        .await,
    );
    assert_eq!(added["id"], "teapot");
    let url = format!("http://{}/v1/chat", listener(&sluice_, "public"));
    assert_eq!(reqwest::get(&url).await.unwrap().status(), 418);
    let list = json_of(&ctl(&admin, &token, &["list"]).await);
    assert_eq!(list["faults"][0]["injected"], 1);
    let shown = json_of(&ctl(&admin, &token, &["show", "teapot"]).await);
    assert_eq!(shown["action"]["abort"]["status"], 418);
    json_of(&ctl(&admin, &token, &["rm", "teapot"]).await);
    assert_eq!(reqwest::get(&url).await.unwrap().status(), 200);

    // A bad experiment: exit code 2 and every error with its path.
    let out = ctl(
        &admin,
        &token,
        &["add", "--action", "abort", "--param", "status=99"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err,
        "ttl: required (how long the experiment may fire, e.g. 5m)\n\
         action.abort.status: 99 is not an HTTP status from 200 to 599\n"
    );
}
