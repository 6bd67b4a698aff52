//! The https client against a TLS server on loopback (a self-signed
//! certificate from rcgen): trusted through `target.ca_file`, refused
//! under the default roots, HTTP/1.1 even where h2 is offered; and what a
//! CA file must hold.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use super::*;

/// An HTTPS server on 127.0.0.1 answering `ok` with the ALPN protocol it
/// agreed in `x-alpn`; it stops with the test's runtime.
async fn tls_server(cert: Vec<u8>, key: Vec<u8>) -> SocketAddr {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert)],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
        )
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        // Bounded by the test: it ends with the runtime.
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let alpn = tls
                    .get_ref()
                    .1
                    .alpn_protocol()
                    .map(|p| String::from_utf8_lossy(p).into_owned())
                    .unwrap_or_default();
                let service = service_fn(move |_req| {
                    let alpn = alpn.clone();
                    async move {
                        let response = http::Response::builder()
                            .header("x-alpn", alpn)
                            .body(Full::new(Bytes::from_static(b"ok")))
                            .unwrap();
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    addr
}

fn call(url: String) -> Call {
    Call {
        method: Method::GET,
        uri: url,
        headers: Vec::new(),
        body: None,
        path: "/tls".into(),
        timeout: Duration::from_secs(10),
        keep_body: true,
    }
}

#[tokio::test]
async fn an_https_target_is_trusted_through_its_ca_file_alone() {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let cert = certified.cert.der().to_vec();
    let addr = tls_server(cert.clone(), certified.key_pair.serialize_der()).await;
    let start = Instant::now();

    let trusted = Client::new("load-tls", std::slice::from_ref(&cert), None).unwrap();
    for host in ["127.0.0.1".to_owned(), "localhost".to_owned()] {
        let mut out = Outcome::default();
        let url = format!("https://{host}:{}/tls", addr.port());
        let body = trusted.send(call(url), start, &mut out).await;
        assert_eq!((out.status, out.failure), (Some(200), None), "{host}");
        assert_eq!(body, b"ok");
    }

    // Mozilla's roots do not know the test's certificate.
    let default = Client::new("load-tls", &[], None).unwrap();
    let mut out = Outcome::default();
    let url = format!("https://127.0.0.1:{}/tls", addr.port());
    default.send(call(url), start, &mut out).await;
    assert_eq!((out.status, out.failure), (None, Some(Failure::Transport)));
}

#[tokio::test]
async fn the_client_speaks_http_1_1_to_a_server_that_offers_h2() {
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let cert = certified.cert.der().to_vec();
    let addr = tls_server(cert.clone(), certified.key_pair.serialize_der()).await;
    let pool = Arc::new(super::pool::Pool::new(connector(&[cert]).unwrap(), None));
    let url: http::Uri = format!("https://127.0.0.1:{}/", addr.port())
        .parse()
        .unwrap();
    let origin = format!("https://127.0.0.1:{}", addr.port());
    let super::pool::Taken::Dial = pool.take(&origin).await.unwrap() else {
        panic!("an empty pool has no idle connection");
    };
    let mut sender = pool.dial(&origin, &url).await.unwrap();
    let request = Request::get("/")
        .header(http::header::HOST, format!("127.0.0.1:{}", addr.port()))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.version(), http::Version::HTTP_11);
    // It offers no ALPN, so an h2-capable server keeps to HTTP/1.1.
    assert_eq!(response.headers()["x-alpn"], "");
}

#[test]
fn a_ca_file_must_hold_pem_certificates() {
    let dir = std::env::temp_dir().join(format!("sluice-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let two = format!("{}{}", certified.cert.pem(), certified.cert.pem());
    let certs = read_ca_file(&write("two.pem", &two)).unwrap();
    assert_eq!(certs, vec![certified.cert.der().to_vec(); 2]);

    let key_only = certified.key_pair.serialize_pem();
    let cases = [
        (
            write("key.pem", &key_only),
            "no PEM certificate (`-----BEGIN CERTIFICATE-----`) in it",
        ),
        (
            write("text.pem", "hello\n"),
            "no PEM certificate (`-----BEGIN CERTIFICATE-----`) in it",
        ),
        (
            write(
                "broken.pem",
                "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
            ),
            "not PEM certificates: ",
        ),
        (
            write(
                "junk.pem",
                "-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n",
            ),
            "certificate 1 is not usable: ",
        ),
        (
            dir.join("missing.pem"),
            "No such file or directory (os error 2)",
        ),
    ];
    for (path, want) in cases {
        let e = read_ca_file(&path).unwrap_err();
        assert!(e.starts_with(want), "{}: {e}", path.display());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

mod grpc;
mod pool;
