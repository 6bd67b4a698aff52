//! The grpc client against an HTTP/2 server over TLS on loopback (ALPN
//! `h2`, the certificate trusted through `target.ca_file`): the request's
//! framing and headers, messages and trailers, a trailers-only error, a
//! body cut inside a message, RESOURCE_EXHAUSTED as rate limited.

use http_body_util::combinators::BoxBody;
use hyper_util::rt::TokioExecutor;

use super::super::grpc::{frame, Grpc};
use super::*;

type Answer = http::Response<BoxBody<Bytes, Infallible>>;

/// The answer to a call of `path` whose request was as the client must send it
/// (else INVALID_ARGUMENT, 3).
fn answer(path: &str, well_formed: bool) -> Answer {
    let trailers = |status: &'static str| async move {
        let mut t = http::HeaderMap::new();
        t.insert("grpc-status", HeaderValue::from_static(status));
        Some(Ok::<_, Infallible>(t))
    };
    let only = |status: &'static str| {
        http::Response::builder()
            .header("content-type", "application/grpc")
            .header("grpc-status", status)
            .body(Full::new(Bytes::new()).boxed())
            .unwrap()
    };
    let with = |body: Vec<u8>, status: &'static str| {
        http::Response::builder()
            .header("content-type", "application/grpc")
            .body(
                Full::new(Bytes::from(body))
                    .with_trailers(trailers(status))
                    .boxed(),
            )
            .unwrap()
    };
    if !well_formed {
        return only("3");
    }
    match path {
        "/t.Svc/Stream" => {
            let mut body = frame(b"a");
            body.extend(frame(b"bcd"));
            with(body, "0")
        }
        "/t.Svc/Cut" => with(frame(b"0123456789")[..8].to_vec(), "0"),
        "/t.Svc/Busy" => only("8"),
        _ => only("14"),
    }
}

/// An HTTP/2-only TLS server answering [`answer`]; it stops with the test's runtime.
async fn grpc_server(cert: Vec<u8>, key: Vec<u8>) -> SocketAddr {
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
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(|req: http::Request<hyper::body::Incoming>| async move {
                    let h = |n: &str| {
                        req.headers()
                            .get(n)
                            .map(|v| v.to_str().unwrap().to_owned())
                            .unwrap_or_default()
                    };
                    let headers_ok = req.method() == Method::POST
                        && h("content-type") == "application/grpc"
                        && h("te") == "trailers"
                        && h("grpc-timeout") == "10000000u"
                        && h("x-tenant") == "a"
                        && h(LOAD_HEADER) == "load-grpc"
                        && !h("traceparent").is_empty();
                    let path = req.uri().path().to_owned();
                    let body = req.into_body().collect().await.unwrap().to_bytes();
                    let ok = headers_ok && body[..] == frame(b"hi")[..];
                    Ok::<_, Infallible>(answer(&path, ok))
                });
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn grpc_calls_are_framed_and_read_to_their_status_over_h2_and_tls() {
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let cert = certified.cert.der().to_vec();
    let addr = grpc_server(cert.clone(), certified.key_pair.serialize_der()).await;
    let client = Grpc::new("load-grpc", &[cert]).unwrap();
    let start = Instant::now();
    let send = |method: &str| {
        let call = Call {
            method: Method::POST,
            uri: format!("https://127.0.0.1:{}/{method}", addr.port()),
            headers: vec![("x-tenant".into(), "a".into())],
            body: Some(b"hi".to_vec()),
            path: format!("/{method}"),
            timeout: Duration::from_secs(10),
            keep_body: true,
        };
        let client = client.clone();
        async move {
            let mut out = Outcome::default();
            let body = client.send(call, start, &mut out).await;
            (out, body)
        }
    };

    let (out, body) = send("t.Svc/Stream").await;
    assert_eq!((out.status, out.failure), (Some(200), None), "{out:?}");
    let reply = out.grpc.clone().unwrap();
    assert_eq!((reply.status, reply.messages, reply.bytes), (Some(0), 2, 4));
    assert_eq!(body, b"abcd");
    assert!(out.first_content_us.is_some() && out.first_byte_us.is_some());
    assert_eq!(out.gaps_us.len(), 1);

    let (out, _) = send("t.Svc/Down").await;
    assert_eq!(
        (out.status, out.failure),
        (Some(200), Some(Failure::Status))
    );
    let reply = out.grpc.unwrap();
    assert_eq!((reply.status, reply.messages), (Some(14), 0));
    assert_eq!(out.first_content_us, None);

    let (out, _) = send("t.Svc/Busy").await;
    assert_eq!(out.failure, Some(Failure::RateLimited));
    assert_eq!(out.grpc.unwrap().status, Some(8));

    // A body that ends inside a message: broken, whatever the trailers say.
    let (out, _) = send("t.Svc/Cut").await;
    assert_eq!(out.failure, Some(Failure::Transport));
    assert_eq!(out.grpc.unwrap().messages, 0);

    // Under Mozilla's roots the test's certificate is not trusted.
    let untrusted = Grpc::new("load-grpc", &[]).unwrap();
    let mut out = Outcome::default();
    let call = Call {
        method: Method::POST,
        uri: format!("https://127.0.0.1:{}/t.Svc/Stream", addr.port()),
        headers: Vec::new(),
        body: None,
        path: "/t.Svc/Stream".into(),
        timeout: Duration::from_secs(10),
        keep_body: false,
    };
    untrusted.send(call, start, &mut out).await;
    assert_eq!(
        (out.status, out.failure, out.grpc),
        (None, Some(Failure::Transport), None)
    );
}
