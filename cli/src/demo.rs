//! `sluice demo`: the whole story on loopback in about a minute. A stable and
//! a canary mock LLM, sluice in front of them, a built-in traffic generator,
//! then a rollout whose canary slows down at step 3 (rolled back) and a
//! healthy retry (promoted), shown live, with a summary at the end.
//!
//! The demo is a *client* of sluice, like a user: it starts rollouts and
//! reads their state through the control API (the same calls as
//! `sluice ctl rollout ...`), so what it shows is what an operator would
//! see. Only the canary's behaviour is changed in-process, through the
//! mock's knobs, because that stands in for a model server going bad.

mod api;
mod render;
mod script;
mod traffic;

use std::net::{SocketAddr, TcpListener};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use sluice_control::Config;

use self::api::Admin;
use self::render::Screen;
use self::script::{Plan, Script};
use self::traffic::Traffic;
use crate::defaults::MockThread;
use crate::mock_llm::MockLlmOptions;
use sluice_proxy::Stop;
use sluice_proxy::{Sluice, StartOptions};

/// Below this the rollout's steps cannot be held long enough to be judged.
pub(crate) const MIN_DEMO_DURATION: Duration = Duration::from_secs(30);
/// Ports a user would expect, used when free.
const PROXY_PORT: u16 = 8080;
const ADMIN_PORT: u16 = 9901;
/// Concurrent streaming clients: about 100 requests a second through the
/// proxy, so the canary at 5% sees the gates' `min_requests` in ~4 s.
const WORKERS: usize = 16;
/// Healthy model timing: short streams (60 ms to the first token, then
/// 8 tokens 10 ms apart) keep the request rate high on a small machine.
pub(crate) const HEALTHY_TTFT: Duration = Duration::from_millis(60);

#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// The time budget of the whole story; the phases scale with it.
    pub duration: Duration,
}

/// Runs the demo to the end: exit 0 when the canary was rolled back at
/// step 3 and the retry promoted, an error saying which phase fell short
/// otherwise.
pub fn run_demo(options: DemoOptions) -> anyhow::Result<ExitCode> {
    if options.duration < MIN_DEMO_DURATION {
        bail!(
            "--duration {}s is too short: the story needs at least {}s",
            options.duration.as_secs(),
            MIN_DEMO_DURATION.as_secs()
        );
    }
    let started = Instant::now();
    let mut screen = Screen::new(started);
    let stable = MockThread::start(mock_options(1)).context("stable mock LLM")?;
    let canary = MockThread::start(mock_options(2)).context("canary mock LLM")?;
    let (sluice, ports) = start_sluice(stable.addr, canary.addr)?;
    let proxy = sluice
        .listeners
        .first()
        .map(|(_, addr)| *addr)
        .context("the demo config has one listener")?;
    screen.setup(&render::Setup {
        proxy,
        admin: sluice.admin_addr,
        ports: &ports,
        stable: stable.addr,
        canary: canary.addr,
        workers: WORKERS,
    });

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let plan = Plan::for_duration(options.duration);
    let admin = Admin::new(sluice.admin_addr, sluice.token.clone());
    let canary_knobs = canary.knobs.clone();
    let story = runtime.block_on(async {
        let traffic = Traffic::start(proxy, WORKERS);
        let mut script = Script {
            admin: &admin,
            canary: &canary_knobs,
            traffic: &traffic,
            screen: &mut screen,
            started,
            plan,
            rates: Default::default(),
        };
        let story = script.play().await;
        traffic.stop().await;
        story
    });
    drop(runtime);
    screen.keep();
    if let Ok(story) = &story {
        screen.summary(story, sluice.admin_addr, &sluice.token);
    }
    // Traffic has stopped, so the drain is immediate.
    sluice.stop(Stop::Drain);
    drop(canary);
    drop(stable);
    screen.note("stopped: proxy, control API and both mock LLMs");
    story?;
    Ok(ExitCode::SUCCESS)
}

fn mock_options(seed: u64) -> MockLlmOptions {
    MockLlmOptions {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        ttft: HEALTHY_TTFT,
        itl: Duration::from_millis(10),
        jitter: Duration::from_millis(5),
        tokens: 8,
        seed,
        ..MockLlmOptions::default()
    }
}

/// Which ports the demo got: the usual ones when free, else ephemeral.
pub(crate) struct Ports {
    pub proxy_preferred: bool,
    pub admin_preferred: bool,
}

/// Starts sluice on 8080/9901 when free, else on ports the system picks
/// (sluice binds port 0 and reports what it got). Another process can take
/// a usual port between the look and the bind; then the start is tried
/// once more on picked ports, which nothing can take first.
fn start_sluice(stable: SocketAddr, canary: SocketAddr) -> anyhow::Result<(Sluice, Ports)> {
    let preferred = Ports {
        proxy_preferred: is_free(PROXY_PORT),
        admin_preferred: is_free(ADMIN_PORT),
    };
    let picked = Ports {
        proxy_preferred: false,
        admin_preferred: false,
    };
    match start_on(&preferred, stable, canary) {
        Ok(sluice) => Ok((sluice, preferred)),
        // Picked ports already: another try would fail the same way.
        Err(e) if !preferred.proxy_preferred && !preferred.admin_preferred => Err(e),
        Err(_) => Ok((start_on(&picked, stable, canary)?, picked)),
    }
}

fn start_on(ports: &Ports, stable: SocketAddr, canary: SocketAddr) -> anyhow::Result<Sluice> {
    let port = |preferred, port| match preferred {
        true => SocketAddr::from(([127, 0, 0, 1], port)),
        false => SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let listen = port(ports.proxy_preferred, PROXY_PORT);
    let admin = port(ports.admin_preferred, ADMIN_PORT);
    let yaml = demo_config_yaml(listen, admin, stable, canary);
    let config = Config::from_yaml(&yaml).map_err(|e| anyhow::anyhow!("demo config: {e}"))?;
    Sluice::start(config, StartOptions::default()).context("starting sluice for the demo")
}

/// Whether nothing listens on `port` on loopback now.
fn is_free(port: u16) -> bool {
    TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).is_ok()
}

/// Two versions of one model behind one route; the split starts all on
/// stable and the rollouts move it. Sessions are sticky so that a user
/// stays on one version while the steps rise.
fn demo_config_yaml(
    listen: SocketAddr,
    admin: SocketAddr,
    stable: SocketAddr,
    canary: SocketAddr,
) -> String {
    format!(
        r#"# sluice demo: a stable and a canary mock LLM behind one route.
runtime: {{ threads: 2, grace_period: 2s }}
admin: {{ listen: "{admin}" }}
listeners:
  - {{ name: public, listen: "{listen}", protocol: http }}
clusters:
  - name: llm-stable
    kind: llm
    version: v1
    endpoints: ["{stable}"]
    timeouts: {{ connect: 1s, first_byte: 10s, idle: 60s }}
  - name: llm-canary
    kind: llm
    version: v2
    endpoints: ["{canary}"]
    timeouts: {{ connect: 1s, first_byte: 10s, idle: 60s }}
routes:
  - name: chat
    listener: public
    match: {{ path_prefix: / }}
    split: {{ llm-stable: 100, llm-canary: 0 }}
    sticky: {{ header: x-session-id }}
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_config_validates() {
        let a = |port| SocketAddr::from(([127, 0, 0, 1], port));
        let yaml = demo_config_yaml(a(8080), a(0), a(8000), a(8001));
        let config = Config::from_yaml(&yaml).map_err(|e| e.to_string());
        assert!(config.is_ok(), "{config:?}");
    }
}
