//! `clusters[].protocol`: how sluice speaks to a cluster's endpoints.

use super::*;

#[test]
fn plain_clusters_default_to_http1() {
    let c = Config::from_yaml(GOOD).unwrap();
    assert_eq!(c.clusters[0].protocol, UpstreamProtocol::Http1);
    assert!(!c.clusters[0].protocol.allows_h2(false));
}

#[test]
fn each_protocol_reads() {
    for (yaml, want) in [
        ("protocol: http1", UpstreamProtocol::Http1),
        ("protocol: h2c", UpstreamProtocol::H2c),
        ("protocol: auto", UpstreamProtocol::Auto),
        ("protocol: h2, tls: {}", UpstreamProtocol::H2),
    ] {
        let text = GOOD.replacen("version: v2,", &format!("version: v2, {yaml},"), 1);
        let c = Config::from_yaml(&text).unwrap_or_else(|e| panic!("{yaml}: {e}"));
        assert_eq!(c.clusters[1].protocol, want, "{yaml}");
    }
    // `auto` is HTTP/2 only where ALPN can ask for it.
    assert!(UpstreamProtocol::Auto.allows_h2(true));
    assert!(!UpstreamProtocol::Auto.allows_h2(false));
}

#[test]
fn h2_needs_tls_and_h2c_refuses_it() {
    assert_eq!(
        errors_of("version: v2,", "version: v2, protocol: h2,"),
        ["clusters[1].protocol: h2 is HTTP/2 over TLS but the cluster has no `tls`: use `h2c`"]
    );
    assert_eq!(
        errors_of("version: v2,", "version: v2, protocol: h2c, tls: {},"),
        ["clusters[1].protocol: h2c is HTTP/2 without TLS but the cluster has `tls`: use `h2`"]
    );
}

#[test]
fn unknown_protocol() {
    let e = errors_of("version: v2,", "version: v2, protocol: grpc,");
    assert!(
        e[0].starts_with(
            "clusters[1].protocol: unknown variant `grpc`, expected one of `http1`, `h2c`, `h2`, `auto`"
        ),
        "{e:?}"
    );
}
