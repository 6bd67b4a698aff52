//! The soak: the real `sluice` binary under hours-like mixed traffic while
//! the split swaps, delay experiments toggle, the config reloads and the
//! mirror (×2) and the recorder run. Every `sample_every` it reads the
//! process's RSS and open fds from `/proc` and its runtimes' live tasks from
//! `sluice_runtime_tasks`. Goal: no unexpected error, RSS growth under 5%
//! after the warm-up, fds and tasks flat. `benches/soak.sh` runs 30
//! minutes; the `soak` test in CI 3.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::Method;

use crate::integrity::churn::{self, Admin};
use crate::integrity::upstream::{self, Seen};
use crate::integrity::{self, one, Clients, Outcome, Plan};

#[derive(Clone, Debug)]
pub struct SoakPlan {
    pub duration: Duration,
    pub sample_every: Duration,
    /// The first share of the run that is warm-up: growth is measured after it.
    pub warm_up: Duration,
    /// The `sluice` binary to run.
    pub sluice: PathBuf,
    /// Bodies, each way, log-uniform from 1 byte to this.
    pub max_body: usize,
    pub concurrency: usize,
    /// The goal for RSS growth past the warm-up: 5% for the long soak.
    pub max_rss_growth: f64,
}

/// One reading of the process.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    pub seconds: f64,
    pub rss_kib: u64,
    pub fds: u64,
    /// `sluice_runtime_tasks` by runtime.
    pub tasks: BTreeMap<String, u64>,
    /// Requests ended so far, and of them not byte-exact.
    pub requests: u64,
    pub errors: u64,
}

#[derive(Debug, Default)]
pub struct Soak {
    pub samples: Vec<Sample>,
    pub ok: u64,
    /// Failed or corrupted, by reason.
    pub errors: BTreeMap<String, u64>,
    pub churn: churn::ChurnCounts,
    /// The recorder's lines, as `DELETE /v1/recorder` counted them.
    pub recorded_lines: u64,
    /// How the process ended on SIGTERM.
    pub exit: Option<i32>,
}

impl Soak {
    /// The samples past the warm-up.
    fn after_warm_up(&self, warm_up: Duration) -> &[Sample] {
        let from = self
            .samples
            .iter()
            .position(|s| s.seconds >= warm_up.as_secs_f64())
            .unwrap_or(self.samples.len());
        &self.samples[from..]
    }

    /// Every goal missed, empty when all are met. The samples past the
    /// warm-up are cut in halves: RSS compares their means, fds and tasks
    /// the second's floor with the first's top (see below).
    pub fn missed(&self, plan: &SoakPlan) -> Vec<String> {
        let mut out = Vec::new();
        if !self.errors.is_empty() {
            out.push(format!("errors: {:?}", self.errors));
        }
        if self.exit != Some(0) {
            out.push(format!("exit on SIGTERM: {:?}", self.exit));
        }
        let after = self.after_warm_up(plan.warm_up);
        if after.len() < 2 {
            out.push(format!(
                "{} samples after the warm-up, 2 needed",
                after.len()
            ));
            return out;
        }
        let halves = |value: &dyn Fn(&Sample) -> u64| {
            let (first, second) = after.split_at(after.len() / 2);
            let mean = |part: &[Sample]| {
                part.iter().map(|s| value(s) as f64).sum::<f64>() / part.len() as f64
            };
            (mean(first), mean(second))
        };
        let (from, to) = halves(&|s| s.rss_kib);
        if to / from.max(1.0) - 1.0 >= plan.max_rss_growth {
            out.push(format!(
                "RSS grew {:.1}% after the warm-up ({from:.0} -> {to:.0} KiB, means of halves)",
                (to / from.max(1.0) - 1.0) * 100.0
            ));
        }
        // Flat: the second half's floor (lowest sample) no higher than
        // the first half's top. fds and tasks follow the connections and
        // copies in flight and swing within a range from sample to sample;
        // what leaks lifts the whole range, floor over the old top.
        let range = |value: &dyn Fn(&Sample) -> u64| {
            let (first, second) = after.split_at(after.len() / 2);
            let top = first.iter().map(value).max().unwrap_or(0);
            let floor = second.iter().map(value).min().unwrap_or(0);
            (top, floor)
        };
        let fds = range(&|s| s.fds);
        if fds.1 > fds.0 {
            out.push(format!(
                "fds climbed: floor {} over the first half's top {}",
                fds.1, fds.0
            ));
        }
        let tasks = range(&|s| s.tasks.values().sum());
        if tasks.1 > tasks.0 {
            out.push(format!(
                "tasks climbed: floor {} over the first half's top {}",
                tasks.1, tasks.0
            ));
        }
        out
    }
}

const TOKEN: &str = "soak-token";

/// Kills the child when the soak ends early.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn read_proc(pid: u32) -> (u64, u64) {
    let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count() as u64)
        .unwrap_or(0);
    (rss, fds)
}

fn runtime_tasks(metrics: &str) -> BTreeMap<String, u64> {
    metrics
        .lines()
        .filter(|l| l.starts_with("sluice_runtime_tasks{"))
        .filter_map(|l| {
            let name = l.split("runtime=\"").nth(1)?.split('"').next()?;
            let value = l.rsplit(' ').next()?.parse::<f64>().ok()?;
            Some((name.to_owned(), value as u64))
        })
        .collect()
}

/// Runs the soak; `progress` gets each sample as it is taken.
pub fn run(plan: &SoakPlan, progress: &(dyn Fn(&Sample) + Sync)) -> anyhow::Result<Soak> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // Ids past the set's end count as repeats: the set only feeds the
    // integrity run's totals, not the soak's goals.
    let seen = Seen::new(1 << 24);
    let upstreams = runtime.block_on(async {
        Ok::<_, std::io::Error>([
            upstream::start(seen.clone()).await?,
            upstream::start(seen.clone()).await?,
            upstream::start(Seen::new(1)).await?,
        ])
    })?;
    let dir = std::env::temp_dir().join(format!("sluice-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (listen, admin_port) = (crate::free_port()?, crate::free_port()?);
    let config_path = dir.join("sluice.yaml");
    let admin = format!("listen: 127.0.0.1:{admin_port}, token_env: SOAK_ADMIN_TOKEN");
    std::fs::write(
        &config_path,
        // 64 copies out at most: the mirror's tasks follow them.
        integrity::config(listen, &admin, upstreams, plan.max_body, 64),
    )?;
    let child = Command::new(&plan.sluice)
        .args(["run", "-c"])
        .arg(&config_path)
        .env("SOAK_ADMIN_TOKEN", TOKEN)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let mut child = Running(child);
    let pid = child.0.id();
    let admin_addr: std::net::SocketAddr = ([127, 0, 0, 1], admin_port).into();
    let record = dir.join("trace.jsonl");
    let soak = runtime.block_on(drive(plan, pid, listen, admin_addr, &record, progress));
    let _ = std::fs::remove_dir_all(&dir);
    let mut soak = soak?;
    // SIGTERM: the drain, then exit 0.
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Some(status) = child.0.try_wait()? {
            soak.exit = status.code();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(soak)
}

async fn drive(
    plan: &SoakPlan,
    pid: u32,
    listen: u16,
    admin_addr: std::net::SocketAddr,
    record: &std::path::Path,
    progress: &(dyn Fn(&Sample) + Sync),
) -> anyhow::Result<Soak> {
    let admin = Admin::new(admin_addr, TOKEN);
    let ready = Instant::now() + Duration::from_secs(60);
    while admin.call(Method::GET, "/readyz", String::new()).await.0 != 200 {
        anyhow::ensure!(Instant::now() < ready, "sluice did not get ready in 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let churn = tokio::spawn(churn::run(
        Admin::new(admin_addr, TOKEN),
        Duration::from_millis(100),
        50,
        stop.clone(),
    ));
    let clients = Arc::new(Clients::new(([127, 0, 0, 1], listen).into()));
    let integrity = Plan {
        requests: u64::MAX,
        max_body: plan.max_body,
        concurrency: plan.concurrency,
        ..Plan::full()
    };
    let next = Arc::new(AtomicU64::new(0));
    let (ended, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut workers = Vec::new();
    for _ in 0..plan.concurrency {
        let (clients, integrity, next, stop) = (
            clients.clone(),
            integrity.clone(),
            next.clone(),
            stop.clone(),
        );
        let (ended, failed) = (ended.clone(), failed.clone());
        workers.push(tokio::spawn(async move {
            let (mut ok, mut errors, mut mix) =
                (0u64, BTreeMap::<String, u64>::new(), BTreeMap::new());
            while !stop.load(Ordering::Relaxed) {
                let id = next.fetch_add(1, Ordering::Relaxed);
                let why = match one(&clients, &integrity, id, &mut mix).await {
                    Outcome::Ok { .. } => None,
                    Outcome::CorruptRequest => Some("corrupted request".to_owned()),
                    Outcome::CorruptAnswer => Some("corrupted answer".to_owned()),
                    Outcome::Failed(why) => Some(why),
                };
                match why {
                    None => ok += 1,
                    Some(why) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                        *errors.entry(why).or_default() += 1;
                    }
                }
                ended.fetch_add(1, Ordering::Relaxed);
            }
            (ok, errors)
        }));
    }
    let recording = serde_json::json!({
        "path": record, "ttl": "2h", "max_bytes": "256MiB", "rotate_bytes": "16MiB"
    });
    let (status, _) = admin
        .call(Method::PUT, "/v1/recorder", recording.to_string())
        .await;
    let mut soak = Soak::default();
    if status != 201 && status != 200 {
        *soak
            .errors
            .entry(format!("recorder start {status}"))
            .or_default() += 1;
    }
    let started = Instant::now();
    let mut tick = tokio::time::interval(plan.sample_every);
    tick.tick().await;
    loop {
        tick.tick().await;
        let (rss_kib, fds) = read_proc(pid);
        let metrics = scrape(&admin).await;
        let sample = Sample {
            seconds: started.elapsed().as_secs_f64(),
            rss_kib,
            fds,
            tasks: runtime_tasks(&String::from_utf8_lossy(&metrics)),
            requests: ended.load(Ordering::Relaxed),
            errors: failed.load(Ordering::Relaxed),
        };
        progress(&sample);
        soak.samples.push(sample);
        if started.elapsed() + plan.sample_every / 2 >= plan.duration {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let (ok, errors) = w.await?;
        soak.ok += ok;
        for (k, v) in errors {
            *soak.errors.entry(k).or_default() += v;
        }
    }
    soak.churn = churn.await?;
    let (status, body) = admin
        .call(Method::DELETE, "/v1/recorder", String::new())
        .await;
    let lines = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["lines"].as_u64());
    match lines {
        Some(lines) if status == 200 => soak.recorded_lines = lines,
        _ => {
            *soak
                .errors
                .entry(format!("recorder stop {status}"))
                .or_default() += 1
        }
    }
    Ok(soak)
}

/// `/metrics`, asked again (up to 3 times) when the answer fails: a pooled
/// connection the admin API closed as idle fails once, and a sample
/// without its task counts would read as a fall to 0.
async fn scrape(admin: &Admin) -> hyper::body::Bytes {
    let mut last = hyper::body::Bytes::new();
    for _ in 0..3 {
        let (status, body) = admin.call(Method::GET, "/metrics", String::new()).await;
        if status == 200 {
            return body;
        }
        last = body;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    last
}

/// The series as a Markdown table, then the totals and the goals.
pub fn report(plan: &SoakPlan, soak: &Soak) -> String {
    let runtimes: Vec<String> = soak
        .samples
        .iter()
        .flat_map(|s| s.tasks.keys().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut out = format!(
        "| s | RSS MiB | fds | {} | requests | errors |\n|---|---|---|{}---|---|\n",
        runtimes
            .iter()
            .map(|r| format!("tasks {r}"))
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(runtimes.len())
    );
    for s in &soak.samples {
        let tasks: Vec<String> = runtimes
            .iter()
            .map(|r| s.tasks.get(r).map_or("-".to_owned(), u64::to_string))
            .collect();
        out.push_str(&format!(
            "| {:.0} | {:.1} | {} | {} | {} | {} |\n",
            s.seconds,
            s.rss_kib as f64 / 1024.0,
            s.fds,
            tasks.join(" | "),
            s.requests,
            s.errors
        ));
    }
    out.push_str(&format!(
        "\nsoak: {:.0} s, {} byte-exact, errors {:?}, recorded {} lines, churn {:?}, exit on SIGTERM {:?}\n",
        plan.duration.as_secs_f64(),
        soak.ok,
        soak.errors,
        soak.recorded_lines,
        soak.churn,
        soak.exit
    ));
    let missed = soak.missed(plan);
    if missed.is_empty() {
        out.push_str(&format!(
            "goals: met (no error, RSS growth under {:.0}% after the warm-up, fds and tasks flat)\n",
            plan.max_rss_growth * 100.0
        ));
    } else {
        out.push_str(&format!("goals missed: {}\n", missed.join("; ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(seconds: f64, rss_kib: u64, fds: u64, tasks: u64) -> Sample {
        Sample {
            seconds,
            rss_kib,
            fds,
            tasks: BTreeMap::from([("control".to_owned(), tasks)]),
            ..Sample::default()
        }
    }

    #[test]
    fn the_goals_read_the_series_after_the_warm_up() {
        let plan = SoakPlan {
            duration: Duration::from_secs(60),
            sample_every: Duration::from_secs(10),
            warm_up: Duration::from_secs(20),
            sluice: PathBuf::new(),
            max_body: 1,
            concurrency: 1,
            max_rss_growth: 0.05,
        };
        let mut soak = Soak {
            exit: Some(0),
            samples: vec![
                sample(10.0, 50_000, 30, 10),
                sample(20.0, 100_000, 40, 40),
                sample(30.0, 101_000, 44, 12),
                sample(40.0, 103_000, 40, 30),
                sample(50.0, 102_000, 42, 14),
            ],
            ..Soak::default()
        };
        // The warm-up's doubling does not count, nor tasks that swing with
        // the load: the RSS means are 1.5% apart, the ranges overlap.
        assert_eq!(soak.missed(&plan), Vec::<String>::new());
        // A second half that climbs: RSS 6.5% on the means, fds and tasks
        // on their floors.
        soak.samples = vec![
            sample(10.0, 50_000, 30, 10),
            sample(20.0, 100_000, 40, 12),
            sample(30.0, 100_000, 42, 40),
            sample(40.0, 106_000, 80, 60),
            sample(50.0, 107_000, 90, 70),
        ];
        let missed = soak.missed(&plan);
        assert_eq!(missed.len(), 3, "{missed:?}");
        assert!(missed[0].starts_with("RSS grew 6.5%"), "{missed:?}");
        assert_eq!(
            missed[1],
            "fds climbed: floor 80 over the first half's top 42"
        );
        assert_eq!(
            missed[2],
            "tasks climbed: floor 60 over the first half's top 40"
        );
        assert!(
            runtime_tasks("sluice_runtime_tasks{runtime=\"mirror\"} 7\n").get("mirror") == Some(&7)
        );
    }
}
