//! Protocols end to end: HTTP/1.1 and h2c on one http listener, an https listener
//! that picks h2 or HTTP/1.1 by ALPN, and clusters reached over TLS.

use std::net::SocketAddr;
use std::path::Path;

use http::Version;
use serde_json::Value;

use crate::harness::{self, TestConfig};
use crate::support::{self, NamedUpstream, TlsFixture};

/// `config` with one cluster `up` at `endpoint` (plus `extra` cluster keys) and a
/// catch-all route `all` on listener `public` to it.
fn cluster_and_route(config: TestConfig, endpoint: SocketAddr, extra: &str) -> String {
    config
        .cluster_with("up", "http", [endpoint], extra)
        .route_with("all", "up: 100", "match: { path_prefix: / }")
        .yaml()
}

async fn echo_of(response: reqwest::Response) -> Value {
    assert_eq!(response.status(), 200, "{response:?}");
    response.json().await.expect("echo JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_listener_serves_h1_and_h2c_on_one_port() {
    let upstream = NamedUpstream::start("alpha").await.unwrap();
    let yaml = cluster_and_route(TestConfig::http(), upstream.addr(), "");
    let sluice = harness::start(&yaml);
    let url = format!("http://{}/v1/h2c?q=1", harness::listener(&sluice, "public"));

    let h2c = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let response = h2c.post(&url).body("over h2c").send().await.unwrap();
    assert_eq!(response.version(), Version::HTTP_2);
    let echo = echo_of(response).await;
    assert_eq!(echo["upstream"], "alpha");
    assert_eq!(echo["path"], "/v1/h2c");
    assert_eq!(echo["query"], "q=1");
    assert_eq!(echo["body_sha256"], support::sha256_hex(b"over h2c"));

    let h1 = reqwest::Client::builder().http1_only().build().unwrap();
    let response = h1.post(&url).body("over h1").send().await.unwrap();
    assert_eq!(response.version(), Version::HTTP_11);
    let echo = echo_of(response).await;
    assert_eq!(echo["upstream"], "alpha");
    assert_eq!(echo["body_sha256"], support::sha256_hex(b"over h1"));

    // A few more on each client: the h2 connection multiplexes, h1 keeps alive.
    for client in [&h2c, &h1] {
        for _ in 0..3 {
            let response = client.get(&url).send().await.unwrap();
            assert_eq!(response.status(), 200);
        }
    }
    assert_eq!(upstream.requests(), 8);
}

/// A client that trusts only the fixture and resolves `localhost` to `addr`.
fn client_for(tls: &TlsFixture, addr: SocketAddr, h1_only: bool) -> reqwest::Client {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(tls.reqwest_certificate().unwrap())
        .resolve("localhost", addr);
    if h1_only {
        builder = builder.http1_only();
    }
    builder.build().unwrap()
}

fn path_yaml(p: &Path) -> String {
    p.to_str().expect("UTF-8 temp path").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_listener_serves_h1_and_h2_by_alpn() {
    support::install_crypto_provider();
    let tls = TlsFixture::new().unwrap();
    let upstream = NamedUpstream::start("beta").await.unwrap();
    let files = format!(
        "cert: \"{}\", key: \"{}\"",
        path_yaml(&tls.cert_path()),
        path_yaml(&tls.key_path())
    );
    let https = TestConfig::new().listener("public", "https", &files);
    let yaml = cluster_and_route(https, upstream.addr(), "");
    let sluice = harness::start(&yaml);
    let addr = harness::listener(&sluice, "public");
    let url = format!("https://localhost:{}/tls", addr.port());

    let h1 = client_for(&tls, addr, true);
    let response = h1.post(&url).body("h1 over tls").send().await.unwrap();
    assert_eq!(response.version(), Version::HTTP_11);
    let echo = echo_of(response).await;
    assert_eq!(echo["upstream"], "beta");
    assert_eq!(echo["path"], "/tls");
    assert_eq!(echo["body_sha256"], support::sha256_hex(b"h1 over tls"));

    let h2 = client_for(&tls, addr, false);
    let response = h2.post(&url).body("h2 over tls").send().await.unwrap();
    assert_eq!(response.version(), Version::HTTP_2);
    let echo = echo_of(response).await;
    assert_eq!(echo["upstream"], "beta");
    assert_eq!(echo["body_sha256"], support::sha256_hex(b"h2 over tls"));

    // Plain HTTP on the TLS port gets no answer that parses as HTTP.
    let plain = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{}/", addr.port()))
        .send()
        .await;
    assert!(plain.is_err() || plain.unwrap().status() != 200);
}

/// Sluice on a plain http listener in front of `up` reached over TLS with `tls_yaml`.
async fn through_tls_cluster(upstream: &NamedUpstream, tls_yaml: &str) -> (u16, Value) {
    let tls = format!("tls: {tls_yaml}");
    let yaml = cluster_and_route(TestConfig::http(), upstream.addr(), &tls);
    let sluice = harness::start(&yaml);
    let url = format!("http://{}/secure", harness::listener(&sluice, "public"));
    let response = reqwest::Client::new()
        .post(&url)
        .body("to tls upstream")
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(Value::Null);
    drop(sluice);
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_over_tls_verified_with_a_ca_or_unverified() {
    support::install_crypto_provider();
    let tls = TlsFixture::new().unwrap();
    let upstream = NamedUpstream::start_tls("secure", &tls).await.unwrap();
    let ca = path_yaml(&tls.cert_path());

    let (status, echo) =
        through_tls_cluster(&upstream, &format!("{{ ca: \"{ca}\", sni: localhost }}")).await;
    assert_eq!(status, 200, "{echo}");
    assert_eq!(echo["upstream"], "secure");
    assert_eq!(echo["path"], "/secure");
    assert_eq!(echo["body_sha256"], support::sha256_hex(b"to tls upstream"));

    let (status, echo) = through_tls_cluster(&upstream, "{ verify: false }").await;
    assert_eq!(status, 200, "{echo}");
    assert_eq!(echo["upstream"], "secure");

    // Verification on, but the self-signed certificate is not trusted: no request
    // reaches the upstream and the client gets a connect failure.
    let before = upstream.requests();
    let (status, body) = through_tls_cluster(&upstream, "{ sni: localhost }").await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(upstream.requests(), before);
}

/// One h2c connection, two uploads: the first is held by a 3 s delay fault
/// before sluice reads its body. The second must not wait for it: with
/// h2's default 64 KiB connection window, the held body's first frames
/// filled the window and every other upload on the connection stalled
/// until the delay ended (the integrity run saw 0.5 s for 2-byte requests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2c_upload_held_by_a_fault_does_not_stall_the_others_on_its_connection() {
    let upstream = NamedUpstream::start("alpha").await.unwrap();
    let yaml = TestConfig::http()
        .cluster_with("up", "http", [upstream.addr()], "")
        .route_with(
            "all",
            "up: 100",
            "match: { path_prefix: / }, allow_header_faults: true",
        )
        .yaml();
    let sluice = harness::start(&yaml);
    let url = format!("http://{}/v1/upload", harness::listener(&sluice, "public"));
    let h2c = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let held_body = vec![7u8; 1 << 20];
    let held = tokio::spawn({
        let (h2c, url) = (h2c.clone(), url.clone());
        async move {
            h2c.post(&url)
                .header("x-sluice-fault-delay", "3s")
                .body(held_body)
                .send()
                .await
                .unwrap()
                .status()
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let body = vec![9u8; 100 << 10];
    let started = std::time::Instant::now();
    let response = h2c.post(&url).body(body.clone()).send().await.unwrap();
    assert_eq!(response.version(), Version::HTTP_2);
    let echo = echo_of(response).await;
    assert_eq!(echo["body_sha256"], support::sha256_hex(&body));
    // Answered while the held one still waits out its delay.
    assert!(!held.is_finished());
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(held.await.unwrap(), 200);
}
