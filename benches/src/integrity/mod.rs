//! Integrity under churn: every request and answer body carries its SHA-256
//! through sluice while the split swaps, delay experiments come and go, the
//! config reloads and every request is mirrored twice. Each request either
//! succeeds byte-exact or fails, and the totals add up: what the client
//! sent, what the primary upstreams and the shadow were sent, and what
//! sluice counted of its copies. `benches/integrity.sh` runs a million;
//! the `integrity` test in CI 50,000 of the same.

pub(crate) mod churn;
pub(crate) mod upstream;
pub mod wire;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use sluice_control::Config;
use sluice_proxy::{Sluice, StartOptions};

pub use churn::ChurnCounts;
pub use upstream::{IdSet, Seen};
use wire::{Framed, Framing};

/// The run's shape.
#[derive(Clone, Debug)]
pub struct Plan {
    pub requests: u64,
    /// Bodies (each way) are drawn log-uniformly from 1 byte to this.
    pub max_body: usize,
    /// Requests in flight at once.
    pub concurrency: usize,
    pub seed: u64,
    /// How often the split swaps (and every third time, an experiment).
    pub tick: Duration,
    /// The config is read back and put again every this many ticks.
    pub reload_ticks: u64,
}

impl Plan {
    /// The issue's run: a million requests, bodies up to 4 MiB.
    pub fn full() -> Self {
        Plan {
            requests: 1_000_000,
            max_body: 4 << 20,
            concurrency: 32,
            seed: 1,
            tick: Duration::from_millis(100),
            reload_ticks: 50,
        }
    }
}

/// How each request ended, and what every party counted.
#[derive(Debug, Default)]
pub struct Totals {
    pub sent: u64,
    /// Byte-exact both ways.
    pub ok: u64,
    /// The upstream got a body that did not hash as sent.
    pub corrupted_requests: u64,
    /// The client got an answer that did not hash as the upstream sent it.
    pub corrupted_answers: u64,
    /// Failed, by reason (status or error).
    pub failed: BTreeMap<String, u64>,
    pub request_bytes: u64,
    pub answer_bytes: u64,
    /// By (HTTP version, request framing, answer framing).
    pub mix: BTreeMap<String, u64>,
    pub primary_good: u64,
    pub primary_bad: u64,
    /// Distinct ids the primary clusters saw, and repeats of one.
    pub primary_ids: u64,
    pub primary_again: u64,
    pub shadow_good: u64,
    pub shadow_bad: u64,
    /// sluice's `sluice_mirror_requests_total` by result.
    pub mirror: BTreeMap<String, u64>,
    pub churn: ChurnCounts,
    pub seconds: f64,
}

impl Totals {
    pub fn failed(&self) -> u64 {
        self.failed.values().sum()
    }

    /// Copies sluice accounted for, whatever their result.
    pub fn mirrored(&self) -> u64 {
        self.mirror.values().sum()
    }

    /// Every way the totals fail to add up, empty when they do.
    pub fn discrepancies(&self, copies: u64) -> Vec<String> {
        let mut out = Vec::new();
        let ended = self.ok + self.corrupted_requests + self.corrupted_answers + self.failed();
        if ended != self.sent {
            out.push(format!("{} sent but {ended} ended", self.sent));
        }
        if self.corrupted_requests + self.corrupted_answers + self.primary_bad + self.shadow_bad > 0
        {
            out.push("a body was corrupted".to_owned());
        }
        // Every answered request reached a primary cluster, once.
        if self.primary_ids < self.ok {
            out.push(format!(
                "{} answered but the primary saw {} ids",
                self.ok, self.primary_ids
            ));
        }
        if self.mirrored() != copies * self.sent {
            out.push(format!(
                "{} copies accounted for, {} expected",
                self.mirrored(),
                copies * self.sent
            ));
        }
        let shadow_ok = self.mirror.get("ok").copied().unwrap_or(0);
        if self.shadow_good < shadow_ok {
            out.push(format!(
                "sluice counted {shadow_ok} copies ok, the shadow got {}",
                self.shadow_good
            ));
        }
        out
    }
}

/// Copies per request the run mirrors.
pub const COPIES: u64 = 2;

/// The run's sluice: route `r` on `listen`, split over clusters `a` and
/// `b`, every request mirrored to `shadow` with at most `in_flight` copies
/// out; `admin` is what the `admin:` mapping holds (the soak gives its port
/// and token).
pub(crate) fn config(
    listen: u16,
    admin: &str,
    [a, b, shadow]: [SocketAddr; 3],
    max_body: usize,
    in_flight: usize,
) -> String {
    format!(
        "runtime: {{ threads: 2 }}
admin: {{ {admin} }}
listeners:
  - {{ name: public, listen: 127.0.0.1:{listen}, protocol: http }}
clusters:
  - {{ name: a, kind: llm, endpoints: [{a}] }}
  - {{ name: b, kind: llm, endpoints: [{b}] }}
  - {{ name: shadow, kind: llm, endpoints: [{shadow}] }}
routes:
  - name: r
    listener: public
    split: {{ a: 50, b: 50 }}
    mirror: {{ cluster: shadow, copies: {COPIES}, max_body: {mirror_max}, max_in_flight: {in_flight}, timeout: 60s }}
",
        mirror_max = max_body.max(1),
    )
}

/// A number from `seed` and `n` (SplitMix64): the same draw in every run.
fn draw(seed: u64, n: u64) -> u64 {
    let mut z = seed.wrapping_add(n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Log-uniform from 1 to `max` bytes: the median is `sqrt(max)`.
fn size(seed: u64, n: u64, max: usize) -> usize {
    let u = (draw(seed, n) >> 11) as f64 / (1u64 << 53) as f64;
    ((max as f64).ln() * u).exp().floor().clamp(1.0, max as f64) as usize
}

type Body = BoxBody<Bytes, Infallible>;

pub(crate) struct Clients {
    h1: Client<HttpConnector, Body>,
    h2: Client<HttpConnector, Body>,
    url: String,
}

impl Clients {
    /// HTTP/1.1 and h2c clients of the route at `listen`.
    pub(crate) fn new(listen: SocketAddr) -> Self {
        Clients {
            h1: Client::builder(TokioExecutor::new()).build_http(),
            h2: Client::builder(TokioExecutor::new())
                .http2_only(true)
                .build_http(),
            url: format!("http://{listen}/v1/integrity"),
        }
    }
}

pub(crate) enum Outcome {
    Ok { sent: u64, got: u64 },
    CorruptRequest,
    CorruptAnswer,
    Failed(String),
}

/// Request `id`: its protocol, framings and sizes drawn from the seed.
pub(crate) async fn one(
    clients: &Clients,
    plan: &Plan,
    id: u64,
    mix: &mut BTreeMap<String, u64>,
) -> Outcome {
    let d = draw(plan.seed ^ 0xc0ffee, id);
    let h2 = d & 1 == 1;
    let chunked = d & 2 == 2;
    let answer = Framing::ALL[((d >> 2) % 3) as usize];
    let sent = wire::bytes_of(id, size(plan.seed, 2 * id, plan.max_body));
    let wanted = size(plan.seed, 2 * id + 1, plan.max_body);
    *mix.entry(format!(
        "{} {} {:?}",
        if h2 { "h2c" } else { "h1" },
        if chunked { "chunked" } else { "length" },
        answer
    ))
    .or_default() += 1;
    let sha = wire::sha256_hex(&sent);
    let len = sent.len() as u64;
    let body: Body = if chunked {
        Framed(wire::frames(Bytes::from(sent), &[1, 16_384, 777])).boxed()
    } else {
        Full::new(Bytes::from(sent)).boxed()
    };
    let request = Request::builder()
        .method(Method::POST)
        .uri(&clients.url)
        .header(wire::ID, id)
        .header(wire::SHA256, sha)
        .header(wire::ANSWER, answer.ask(wanted))
        .body(body);
    let Ok(request) = request else {
        return Outcome::Failed("request build".to_owned());
    };
    let client = if h2 { &clients.h2 } else { &clients.h1 };
    let response = match client.request(request).await {
        Ok(r) => r,
        Err(e) => return Outcome::Failed(format!("send: {e}")),
    };
    if response.status() != 200 {
        return Outcome::Failed(format!("status {}", response.status().as_u16()));
    }
    let header = |name| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (check, sha) = (header(wire::REQUEST_CHECK), header(wire::SHA256));
    let got = match response.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return Outcome::Failed(format!("answer body: {e}")),
    };
    if check.as_deref() != Some("ok") {
        return Outcome::CorruptRequest;
    }
    if sha.as_deref() != Some(wire::sha256_hex(&got).as_str()) {
        return Outcome::CorruptAnswer;
    }
    Outcome::Ok {
        sent: len,
        got: got.len() as u64,
    }
}

/// Runs the plan against an in-process sluice; `progress` is called every
/// few seconds with the requests ended so far.
pub fn run(plan: &Plan, progress: &(dyn Fn(u64, f64) + Sync)) -> anyhow::Result<Totals> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let primary = Seen::new(plan.requests);
    let shadow = Seen::new(plan.requests);
    let (a, b, s) = runtime.block_on(async {
        Ok::<_, std::io::Error>((
            upstream::start(primary.clone()).await?,
            upstream::start(primary.clone()).await?,
            upstream::start(shadow.clone()).await?,
        ))
    })?;
    let yaml = config(
        crate::free_port()?,
        "listen: 127.0.0.1:0",
        [a, b, s],
        plan.max_body,
        256,
    );
    let config = Config::from_yaml(&yaml).map_err(|e| anyhow::anyhow!("{e}"))?;
    let sluice = Sluice::start(config, StartOptions::default())?;
    let listen = sluice.listeners[0].1;
    let admin = churn::Admin::new(sluice.admin_addr, &sluice.token);
    let metrics = churn::Admin::new(sluice.admin_addr, &sluice.token);
    let started = Instant::now();
    let mut totals = runtime.block_on(drive(plan, listen, admin, progress))?;
    totals.seconds = started.elapsed().as_secs_f64();
    // The copies still out finish (or time out) before they are counted.
    totals.mirror = runtime.block_on(settle_mirror(&metrics, COPIES * totals.sent));
    totals.primary_good = primary.good.load(Ordering::Relaxed);
    totals.primary_bad = primary.bad.load(Ordering::Relaxed);
    totals.primary_ids = primary.ids.len();
    totals.primary_again = primary.again.load(Ordering::Relaxed);
    totals.shadow_good = shadow.good.load(Ordering::Relaxed);
    totals.shadow_bad = shadow.bad.load(Ordering::Relaxed);
    drop(sluice);
    Ok(totals)
}

async fn drive(
    plan: &Plan,
    listen: SocketAddr,
    admin: churn::Admin,
    progress: &(dyn Fn(u64, f64) + Sync),
) -> anyhow::Result<Totals> {
    let clients = Arc::new(Clients::new(listen));
    let stop = Arc::new(AtomicBool::new(false));
    let churn = tokio::spawn(churn::run(
        admin,
        plan.tick,
        plan.reload_ticks,
        stop.clone(),
    ));
    let next = Arc::new(AtomicU64::new(0));
    let ended = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for _ in 0..plan.concurrency {
        let (clients, plan, next, ended) =
            (clients.clone(), plan.clone(), next.clone(), ended.clone());
        workers.push(tokio::spawn(async move {
            let mut totals = Totals::default();
            loop {
                let id = next.fetch_add(1, Ordering::Relaxed);
                if id >= plan.requests {
                    return totals;
                }
                totals.sent += 1;
                match one(&clients, &plan, id, &mut totals.mix).await {
                    Outcome::Ok { sent, got } => {
                        totals.ok += 1;
                        totals.request_bytes += sent;
                        totals.answer_bytes += got;
                    }
                    Outcome::CorruptRequest => totals.corrupted_requests += 1,
                    Outcome::CorruptAnswer => totals.corrupted_answers += 1,
                    Outcome::Failed(why) => *totals.failed.entry(why).or_default() += 1,
                }
                ended.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let started = Instant::now();
    let all = tokio::spawn(async move {
        let mut out = Vec::new();
        for w in workers {
            out.push(w.await);
        }
        out
    });
    tokio::pin!(all);
    let parts = loop {
        tokio::select! {
            parts = &mut all => break parts?,
            () = tokio::time::sleep(Duration::from_secs(5)) => {
                progress(ended.load(Ordering::Relaxed), started.elapsed().as_secs_f64());
            }
        }
    };
    stop.store(true, Ordering::Relaxed);
    let mut totals = Totals {
        churn: churn.await?,
        ..Totals::default()
    };
    for part in parts {
        let part = part?;
        totals.sent += part.sent;
        totals.ok += part.ok;
        totals.corrupted_requests += part.corrupted_requests;
        totals.corrupted_answers += part.corrupted_answers;
        totals.request_bytes += part.request_bytes;
        totals.answer_bytes += part.answer_bytes;
        for (k, v) in part.failed {
            *totals.failed.entry(k).or_default() += v;
        }
        for (k, v) in part.mix {
            *totals.mix.entry(k).or_default() += v;
        }
    }
    Ok(totals)
}

/// sluice's count of the route's copies by result, once it reaches
/// `expected` or stops moving for 2 s.
async fn settle_mirror(admin: &churn::Admin, expected: u64) -> BTreeMap<String, u64> {
    let mut last = (0, Instant::now());
    loop {
        let (_, text) = admin.call(Method::GET, "/metrics", String::new()).await;
        let counts = mirror_counts(&String::from_utf8_lossy(&text));
        let sum: u64 = counts.values().sum();
        if sum >= expected || last.1.elapsed() > Duration::from_secs(2) {
            return counts;
        }
        if sum != last.0 {
            last = (sum, Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `sluice_mirror_requests_total{route="r",result=…}` by result.
pub(crate) fn mirror_counts(metrics: &str) -> BTreeMap<String, u64> {
    metrics
        .lines()
        .filter(|l| l.starts_with("sluice_mirror_requests_total{") && l.contains("route=\"r\""))
        .filter_map(|l| {
            let result = l.split("result=\"").nth(1)?.split('"').next()?;
            let value = l.rsplit(' ').next()?.parse::<f64>().ok()?;
            Some((result.to_owned(), value as u64))
        })
        .collect()
}

/// The report: a few lines a person reads, and the totals' verdict.
pub fn report(plan: &Plan, t: &Totals) -> String {
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let mut out = format!(
        "integrity: {} requests (bodies 1 B..{} B log-uniform, {} in flight) in {:.1} s\n\
         ended: {} byte-exact, {} corrupted requests, {} corrupted answers, {} failed {:?}\n\
         bytes: {:.1} MiB sent, {:.1} MiB answered\n\
         primary: {} good bodies, {} bad, {} distinct ids, {} repeats\n\
         mirror ×{COPIES}: sluice counted {:?}; the shadow got {} good bodies, {} bad\n\
         churn: {:?}\n\
         mix: {:?}\n",
        t.sent,
        plan.max_body,
        plan.concurrency,
        t.seconds,
        t.ok,
        t.corrupted_requests,
        t.corrupted_answers,
        t.failed(),
        t.failed,
        mib(t.request_bytes),
        mib(t.answer_bytes),
        t.primary_good,
        t.primary_bad,
        t.primary_ids,
        t.primary_again,
        t.mirror,
        t.shadow_good,
        t.shadow_bad,
        t.churn,
        t.mix,
    );
    let wrong = t.discrepancies(COPIES);
    if wrong.is_empty() {
        out.push_str("verdict: the totals add up\n");
    } else {
        out.push_str(&format!("verdict: {}\n", wrong.join("; ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_log_uniform_with_the_median_at_the_root_of_the_max() {
        let max = 4 << 20;
        let mut sizes: Vec<usize> = (0..20_001).map(|n| size(9, n, max)).collect();
        sizes.sort_unstable();
        let median = sizes[10_000] as f64;
        // sqrt(4 MiB) = 2048: within 5% on 20,001 draws.
        assert!((median / 2048.0 - 1.0).abs() < 0.05, "{median}");
        assert_eq!(sizes[0], 1);
        assert!(sizes[20_000] <= max && sizes[20_000] > max / 2);
    }

    #[test]
    fn mirror_counts_read_the_routes_results() {
        let text = "sluice_mirror_requests_total{result=\"ok\",route=\"r\"} 10\n\
                    sluice_mirror_requests_total{result=\"in_flight\",route=\"r\"} 2\n\
                    sluice_mirror_requests_total{result=\"ok\",route=\"other\"} 5\n";
        let counts = mirror_counts(text);
        assert_eq!(counts.get("ok"), Some(&10));
        assert_eq!(counts.get("in_flight"), Some(&2));
        assert_eq!(counts.len(), 2);
    }
}
