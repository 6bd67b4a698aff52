//! The control API's security against a running sluice: named tokens and their scopes
//! (401 for a wrong token, 403 for too small a scope), rotation by editing the token
//! file, the per-peer limit on failed authentications, the client CA (mTLS) on the
//! admin listener, and the audit log as JSON lines naming the token of each change.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use serde_json::{json, Value};
use sluice_proxy::Sluice;

use crate::harness::{llm_config, metric_value, metrics};
use crate::support::{TempDir, TlsFixture, WAIT_POLL};

/// Three tokens, one per scope, in the multi-line `token_file` form.
const TOKENS: &str =
    "# name scope token\nci read read-secret\nops write write-secret\nroot admin admin-secret\n";

fn start(admin_extra: &str, dir: &TempDir) -> Sluice {
    let tokens = dir.write("tokens", TOKENS);
    llm_config("127.0.0.1:9")
        .admin(format!(
            "listen: 127.0.0.1:0, token_file: {}{admin_extra}",
            tokens.display()
        ))
        .start()
}

/// The status and JSON body of one request with `token` (none: no header).
async fn call(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, Value) {
    let mut request = client.request(method, url).body(body.to_owned());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("an answer");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_token_gets_403_on_put_and_a_wrong_token_401() {
    let dir = TempDir::new("admin-scopes");
    let sluice = start("", &dir);
    let client = reqwest::Client::new();
    let url = |p: &str| format!("http://{}{p}", sluice.admin_addr);
    let split = json!({"llm": 100}).to_string();
    let put = reqwest::Method::PUT;
    let get = reqwest::Method::GET;

    let (status, _) = call(
        &client,
        get.clone(),
        &url("/v1/routes"),
        Some("read-secret"),
        "",
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = call(
        &client,
        put.clone(),
        &url("/v1/routes/chat/split"),
        Some("read-secret"),
        &split,
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(body["needed_scope"], "write");
    let (status, body) = call(
        &client,
        get.clone(),
        &url("/v1/routes"),
        Some("not-a-token"),
        "",
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(body, json!({"error": "missing or wrong bearer token"}));
    let (status, _) = call(&client, get, &url("/v1/routes"), None, "").await;
    assert_eq!(status, 401);

    let (status, _) = call(
        &client,
        put.clone(),
        &url("/v1/routes/chat/split"),
        Some("write-secret"),
        &split,
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = call(
        &client,
        put.clone(),
        &url("/v1/config"),
        Some("write-secret"),
        "{}",
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(body["needed_scope"], "admin");
    // The handle's token is the first `admin` one of the file.
    assert_eq!(sluice.token, "admin-secret");
    let text = metrics(&sluice).await;
    let failures = |reason| {
        metric_value(
            &text,
            "sluice_admin_auth_failures_total",
            &[("reason", reason)],
        )
    };
    assert_eq!(failures("scope"), Some(2.0));
    assert_eq!(failures("wrong_token"), Some(1.0));
    assert_eq!(failures("missing_token"), Some(1.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_out_token_gets_401_within_a_second_of_the_edit() {
    let dir = TempDir::new("admin-rotate");
    let sluice = start("", &dir);
    let client = reqwest::Client::new();
    let url = format!("http://{}/v1/routes", sluice.admin_addr);
    let get = reqwest::Method::GET;
    assert_eq!(
        call(&client, get.clone(), &url, Some("read-secret"), "")
            .await
            .0,
        200
    );

    dir.write("tokens", &TOKENS.replace("read-secret", "rotated-secret"));
    let edited = Instant::now();
    let mut old = 200;
    while old != 401 && edited.elapsed() < Duration::from_secs(1) {
        old = call(&client, get.clone(), &url, Some("read-secret"), "")
            .await
            .0;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        old, 401,
        "the old token still works a second after the edit"
    );
    assert_eq!(
        call(&client, get.clone(), &url, Some("rotated-secret"), "")
            .await
            .0,
        200
    );

    // A broken edit keeps the last good tokens, and is counted.
    dir.write("tokens", "ci reader broken\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    let errors = loop {
        let text = metrics(&sluice).await;
        let errors = metric_value(&text, "sluice_admin_token_reload_errors_total", &[]);
        if errors == Some(1.0) || Instant::now() > deadline {
            break errors;
        }
        tokio::time::sleep(WAIT_POLL).await;
    };
    assert_eq!(errors, Some(1.0));
    assert_eq!(
        call(&client, get.clone(), &url, Some("rotated-secret"), "")
            .await
            .0,
        200
    );
    assert_eq!(
        call(&client, get, &url, Some("admin-secret"), "").await.0,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_past_ten_failures_gets_429_and_other_peers_do_not() {
    let dir = TempDir::new("admin-limit");
    let sluice = start("", &dir);
    let client = reqwest::Client::new();
    let url = format!("http://{}/v1/routes", sluice.admin_addr);
    let get = reqwest::Method::GET;
    for _ in 0..10 {
        assert_eq!(
            call(&client, get.clone(), &url, Some("guess"), "").await.0,
            401
        );
    }
    let response = client
        .get(&url)
        .bearer_auth("admin-secret")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    let retry: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    // Another loopback address is another peer.
    let other = reqwest::Client::builder()
        .local_address(IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    assert_eq!(
        call(&other, get, &url, Some("admin-secret"), "").await.0,
        200
    );
    let text = metrics(&sluice).await;
    let failures = metric_value(
        &text,
        "sluice_admin_auth_failures_total",
        &[("reason", "wrong_token")],
    );
    assert_eq!(failures, Some(10.0));
    assert_eq!(
        metric_value(&text, "sluice_admin_auth_refusals_total", &[]),
        Some(1.0)
    );
}

/// A CA, and a client certificate it signed, as PEM.
struct ClientPki {
    ca_pem: String,
    identity_pem: String,
}

fn client_pki() -> ClientPki {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca.self_signed(&ca_key).unwrap();
    let mut client = CertificateParams::new(vec!["admin-client".to_owned()]).unwrap();
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_key = KeyPair::generate().unwrap();
    let client = client.signed_by(&client_key, &ca, &ca_key).unwrap();
    ClientPki {
        ca_pem: ca.pem(),
        identity_pem: format!("{}{}", client.pem(), client_key.serialize_pem()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_client_ca_the_admin_listener_refuses_a_client_without_its_certificate() {
    let server = TlsFixture::new().unwrap();
    let dir = TempDir::new("admin-mtls");
    let pki = client_pki();
    let ca = dir.write("client-ca.pem", &pki.ca_pem);
    let sluice = start(
        &format!(
            ", tls: {{ cert: {}, key: {}, client_ca: {} }}",
            server.cert_path().display(),
            server.key_path().display(),
            ca.display()
        ),
        &dir,
    );
    let url = format!("https://127.0.0.1:{}/v1/routes", sluice.admin_addr.port());
    let builder = || {
        reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(server.reqwest_certificate().unwrap())
    };
    let anonymous = builder().build().unwrap();
    let refused = anonymous.get(&url).bearer_auth("admin-secret").send().await;
    assert!(
        refused.is_err(),
        "answered without a client certificate: {refused:?}"
    );
    // A certificate from another CA is refused as well.
    let stranger = client_pki();
    let stranger = builder()
        .identity(reqwest::Identity::from_pem(stranger.identity_pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    assert!(stranger
        .get(&url)
        .bearer_auth("admin-secret")
        .send()
        .await
        .is_err());

    let identity = reqwest::Identity::from_pem(pki.identity_pem.as_bytes()).unwrap();
    let trusted = builder().identity(identity).build().unwrap();
    let get = reqwest::Method::GET;
    assert_eq!(
        call(&trusted, get.clone(), &url, Some("read-secret"), "")
            .await
            .0,
        200
    );
    // The certificate admits to TLS, not to the API: the token is still checked.
    assert_eq!(call(&trusted, get, &url, Some("guess"), "").await.0, 401);
    let metrics_url = format!("https://127.0.0.1:{}/metrics", sluice.admin_addr.port());
    let text = trusted
        .get(&metrics_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let handshakes = metric_value(
        &text,
        "sluice_admin_auth_failures_total",
        &[("reason", "tls_handshake")],
    );
    assert!(handshakes >= Some(2.0), "{handshakes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_file_has_each_change_with_its_token_name() {
    let dir = TempDir::new("admin-audit");
    let audit = dir.path().join("audit.jsonl");
    let sluice = start(&format!(", audit_file: {}", audit.display()), &dir);
    let client = reqwest::Client::new();
    let url = |p: &str| format!("http://{}{p}", sluice.admin_addr);
    let split = json!({"llm": 100}).to_string();
    let put = reqwest::Method::PUT;
    let (status, _) = call(
        &client,
        put.clone(),
        &url("/v1/routes/chat/split"),
        Some("write-secret"),
        &split,
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = call(&client, put, &url("/v1/config"), Some("read-secret"), "{}").await;
    assert_eq!(status, 403);

    let deadline = Instant::now() + Duration::from_secs(5);
    let lines = loop {
        let text = std::fs::read_to_string(&audit).unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if lines.len() >= 3 || Instant::now() > deadline {
            break lines;
        }
        tokio::time::sleep(WAIT_POLL).await;
    };
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert_eq!(lines[0]["kind"], "event");
    assert_eq!(lines[0]["source"], "startup");
    let change = &lines[1];
    assert_eq!(change["kind"], "change");
    assert_eq!(change["token"], "ops");
    assert_eq!(change["method"], "PUT");
    assert_eq!(change["path"], "/v1/routes/chat/split");
    assert_eq!(change["status"], 200);
    assert_eq!(change["summary"], "set split of route chat");
    assert_eq!(change["events"][0]["token"], "ops");
    assert_eq!(change["events"][0]["result"], "applied");
    let refused = &lines[2];
    assert_eq!(refused["token"], "ci");
    assert_eq!(refused["status"], 403);
    assert_eq!(refused["summary"], "no change: Forbidden");
    // /v1/events names the token too.
    let (_, events) = call(
        &client,
        reqwest::Method::GET,
        &url("/v1/events"),
        Some("read-secret"),
        "",
    )
    .await;
    let last = events["events"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["token"], "ops");
}
