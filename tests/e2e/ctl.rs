//! `sluice ctl` as a user sees it, from the real binary against a running sluice: aligned
//! tables by default, the API's JSON with `--json` (on every verb), an error answer as
//! `path: message` lines, no colour when piped; `sluice completions` and `sluice man`.
//! `watch` has the rollout watch, with its exit codes.

mod watch;

use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice_proxy::Sluice;

use crate::cli::{sluice, sluice_bin};
use crate::harness::{llm_config, Admin};
use crate::support::{NamedUpstream, TempDir, WAIT_POLL};

/// `sluice ctl --url URL --token TOKEN ARGS...` started, its output piped.
pub(crate) fn spawn_ctl(url: &str, token: &str, args: &[&str]) -> Child {
    Command::new(sluice_bin())
        .arg("ctl")
        .args(["--url", url, "--token", token])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sluice ctl")
}

/// Waits for a started `sluice ctl` to exit, killed (and the test failed) past `limit`;
/// its status, what is left to read of its stdout from `stdout`, and its stderr.
pub(crate) fn finish(mut child: Child, mut stdout: impl Read, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sluice ctl still running after {limit:?}");
        }
        std::thread::sleep(WAIT_POLL);
    };
    // What it wrote is small (lines, a table): the pipes held it all.
    let (mut out, mut err) = (Vec::new(), Vec::new());
    stdout.read_to_end(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_end(&mut err).unwrap();
    Output {
        status,
        stdout: out,
        stderr: err,
    }
}

/// `sluice ctl --url URL --token TOKEN ARGS...` run to its end, killed (and the test
/// failed) past `limit`.
pub(crate) async fn ctl_at(url: &str, token: &str, args: &[&str], limit: Duration) -> Output {
    let mut child = spawn_ctl(url, token, args);
    tokio::task::spawn_blocking(move || {
        let stdout = child.stdout.take().unwrap();
        finish(child, stdout, limit)
    })
    .await
    .unwrap()
}

/// `sluice ctl ARGS...` against `sluice`'s control API with its token.
pub(crate) async fn ctl(sluice: &Sluice, args: &[&str]) -> Output {
    let url = format!("http://{}", sluice.admin_addr);
    ctl_at(&url, &sluice.token, args, Duration::from_secs(30)).await
}

pub(crate) fn stdout(out: &Output) -> String {
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(!text.contains('\x1b'), "colour on a pipe: {text:?}");
    text
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

/// The verb succeeded; its stdout.
fn ok(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    stdout(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_prints_tables_and_with_json_the_apis_answer() {
    let up = NamedUpstream::start("a").await.unwrap();
    let sluice_ = llm_config(up.addr()).start();
    let admin = Admin::new(&sluice_);

    assert_eq!(
        ok(&ctl(&sluice_, &["routes"]).await),
        "ROUTE  LISTENER  SPLIT    STICKY\nchat   public    llm=100  -\n"
    );
    // `--json` anywhere after `ctl`: the API's answer, as it came.
    let json: Value =
        serde_json::from_str(&ok(&ctl(&sluice_, &["routes", "--json"]).await)).unwrap();
    assert_eq!(json, admin.get("/v1/routes").await.1);

    // A change prints what the API answered: fields without --json, the JSON with it.
    let set = ok(&ctl(&sluice_, &["split", "chat", "llm=100"]).await);
    let version = admin.get("/v1/config").await.1["version"].clone();
    assert_eq!(
        set,
        format!("route      chat\nsplit.llm  100\nversion    {version}\n")
    );
    let set: Value =
        serde_json::from_str(&ok(
            &ctl(&sluice_, &["--json", "split", "chat", "llm=100"]).await
        ))
        .unwrap();
    assert_eq!(set["route"], "chat");
    assert_eq!(set["split"]["llm"], 100);

    // Stats and the audit log are tables; every line of a table starts its columns at
    // the header's offsets.
    let _ = reqwest::get(format!(
        "http://{}/v1/chat",
        crate::harness::listener(&sluice_, "public")
    ))
    .await
    .unwrap();
    let stats = ok(&ctl(&sluice_, &["stats"]).await);
    assert!(
        stats.starts_with("ROUTE  CLUSTER  VERSION  REQUESTS"),
        "{stats}"
    );
    assert!(stats.contains("(over the last"), "{stats}");
    let events = ok(&ctl(&sluice_, &["events"]).await);
    let lines: Vec<&str> = events.lines().collect();
    let action_at = lines[0].find("ACTION").unwrap();
    assert!(lines[0].starts_with("SEQ  TIME"), "{events}");
    let split_rows: Vec<&&str> = lines.iter().filter(|l| l.contains("set split")).collect();
    assert_eq!(split_rows.len(), 2, "{events}");
    for row in split_rows {
        assert_eq!(row.find("set split"), Some(action_at), "{events}");
        assert!(row.contains("applied"), "{events}");
    }
    // The config as YAML that reads back as the live config.
    let config = ok(&ctl(&sluice_, &["config"]).await);
    let live = sluice_.store().load();
    let head = format!("# version {}, hash {}\n", live.version, live.hash);
    assert!(config.starts_with(&head), "{config}");
    let (_, yaml) = config.split_once('\n').unwrap();
    let read = sluice_control::RawConfig::from_yaml(yaml).unwrap();
    assert_eq!(read, live.config.raw);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_shows_api_errors_as_path_and_message_lines() {
    let up = NamedUpstream::start("a").await.unwrap();
    let sluice_ = llm_config(up.addr()).start();
    let refused = |out: &Output| -> Vec<String> {
        assert_eq!(out.status.code(), Some(2), "{}", stderr(out));
        assert!(stdout(out).is_empty());
        let text = stderr(out);
        assert!(!text.contains('{'), "raw JSON: {text}");
        text.lines().map(str::to_owned).collect()
    };

    let out = ctl(&sluice_, &["split", "chat", "llm=50", "nowhere=50"]).await;
    assert_eq!(
        refused(&out),
        ["routes[0].split.nowhere: unknown cluster `nowhere`"]
    );
    let out = ctl(&sluice_, &["split", "nope", "llm=100"]).await;
    assert_eq!(refused(&out), ["route: unknown route `nope`"]);
    // --json changes what a success prints, not how an error reads.
    let out = ctl(&sluice_, &["--json", "rollout", "show", "nope"]).await;
    assert_eq!(refused(&out), ["name: unknown rollout `nope`"]);

    // A whole config with two errors: a line each, with its path.
    let dir = TempDir::new("ctl-apply");
    let yaml = llm_config(up.addr())
        .yaml()
        .replace("grace_period: 5s", "grace_period: 5sec")
        .replace("llm: 100", "llm: 100, ghost: 1");
    let file = dir.write("bad.yaml", &yaml);
    let out = ctl(&sluice_, &["apply", file.to_str().unwrap()]).await;
    assert_eq!(
        refused(&out),
        [
            "runtime.grace_period: `5sec` has unknown unit `sec` (use us, ms, s, m or h)",
            "routes[0].split.ghost: unknown cluster `ghost`",
        ]
    );

    // A wrong token: the API's one message.
    let url = format!("http://{}", sluice_.admin_addr);
    let out = ctl_at(&url, "wrong", &["routes"], Duration::from_secs(30)).await;
    assert_eq!(refused(&out), ["missing or wrong bearer token"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_and_the_man_page_come_from_the_binary() {
    let out = sluice(vec!["completions".into(), "bash".into()]).await;
    assert_eq!(out.status.code(), Some(0));
    let bash = String::from_utf8(out.stdout).unwrap();
    assert!(bash.contains("ctl") && bash.contains("load"), "{bash}");
    let out = sluice(vec!["man".into()]).await;
    assert_eq!(out.status.code(), Some(0));
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains("\n.TH sluice 1 "), "{page}");
    assert!(page.contains("sluice\\-ctl(1)"), "{page}");
}
