//! Tests of the helpers themselves, against real sockets and processes.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

const WAIT: Duration = Duration::from_secs(5);

#[tokio::test]
async fn named_upstream_echoes_the_request_over_h1_and_h2c() {
    let upstream = NamedUpstream::start("alpha").await.unwrap();
    wait_for_tcp(upstream.addr(), WAIT).await.unwrap();

    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat?x=1", upstream.url()))
        .header("x-test", "yes")
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-upstream"], "alpha");
    let echo: serde_json::Value = response.json().await.unwrap();
    assert_eq!(echo["upstream"], "alpha");
    assert_eq!(echo["method"], "POST");
    assert_eq!(echo["path"], "/v1/chat");
    assert_eq!(echo["query"], "x=1");
    assert_eq!(echo["version"], "HTTP/1.1");
    assert_eq!(echo["body_len"], 5);
    assert_eq!(echo["body_sha256"], sha256_hex(b"hello"));
    assert_eq!(
        echo["body_sha256"],
        "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    );
    assert_eq!(echo["headers"]["x-test"], "yes");

    let h2c = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let echo = crate::harness::json_of(h2c.get(upstream.url())).await;
    assert_eq!(echo["version"], "HTTP/2.0");
    assert_eq!(upstream.requests(), 2);

    let addr = upstream.addr();
    drop(upstream);
    // Stopped on drop: the listener closes once the aborted task is dropped.
    let deadline = Instant::now() + WAIT;
    while tokio::net::TcpStream::connect(addr).await.is_ok() {
        assert!(
            Instant::now() < deadline,
            "upstream still accepting after drop"
        );
        tokio::time::sleep(WAIT_POLL).await;
    }
}

#[tokio::test]
async fn tls_upstream_serves_h2_with_the_fixture_certificate() {
    let tls = TlsFixture::new().unwrap();
    assert!(tls.cert_path().is_file() && tls.key_path().is_file());
    assert!(std::fs::read_to_string(tls.cert_path())
        .unwrap()
        .contains("BEGIN CERTIFICATE"));

    let upstream = NamedUpstream::start_tls("secure", &tls).await.unwrap();
    let client = tls.client().unwrap();
    for url in [
        upstream.url(),
        format!("https://localhost:{}", upstream.addr().port()),
    ] {
        let response = client.post(&url).body("x").send().await.unwrap();
        assert_eq!(response.version(), http::Version::HTTP_2);
        assert_eq!(response.headers()["x-upstream"], "secure");
        let echo: serde_json::Value = response.json().await.unwrap();
        assert_eq!(echo["body_len"], 1);
    }

    // A client that does not trust the fixture is refused.
    assert!(reqwest::get(upstream.url()).await.is_err());

    let dir = tls.dir().to_path_buf();
    drop(tls);
    assert!(!dir.exists());
}

#[tokio::test]
async fn redis_server_answers_ping() {
    if !require("redis-server", redis_available()) {
        return;
    }
    let redis = RedisServer::start().await.unwrap();
    let mut conn = tokio::net::TcpStream::connect(redis.addr()).await.unwrap();
    conn.write_all(b"PING\r\n").await.unwrap();
    let mut reply = [0u8; 7];
    conn.read_exact(&mut reply).await.unwrap();
    assert_eq!(&reply, b"+PONG\r\n");

    let addr = redis.addr();
    drop(redis);
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[test]
fn python_imports_openai() {
    let Some(python) = python() else {
        require("python with openai (.venv)", false);
        return;
    };
    let out = std::process::Command::new(python)
        .args(["-c", "import openai; print(openai.__version__)"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).trim().is_empty());
}

#[tokio::test]
async fn wait_for_tcp_gives_up_on_a_closed_port() {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], free_port()));
    let err = wait_for_tcp(addr, Duration::from_millis(100))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("nothing accepted"), "{err}");
}
