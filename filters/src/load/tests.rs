#![allow(clippy::unwrap_used)]

use std::net::IpAddr;

use super::*;

fn ip(text: &str) -> Option<IpAddr> {
    Some(text.parse().unwrap())
}

fn loopback() -> Vec<Cidr> {
    vec![Cidr::LOOPBACK_V4, Cidr::LOOPBACK_V6]
}

#[test]
fn a_trusted_peer_with_a_valid_run_id_is_load() {
    let trusted = loopback();
    let mark = classify(ip("127.0.0.1"), &trusted, Some(b"load-00ab.cd_ef:1"));
    assert_eq!(mark, LoadMark::Load("load-00ab.cd_ef:1"));
    assert_eq!(mark.source(), Source::Load);
    assert_eq!(
        classify(ip("127.9.8.7"), &trusted, Some(b"r")),
        LoadMark::Load("r")
    );
    assert_eq!(
        classify(ip("::1"), &trusted, Some(b"run-1")),
        LoadMark::Load("run-1")
    );
}

#[test]
fn without_the_header_a_request_is_a_users() {
    let mark = classify(ip("127.0.0.1"), &loopback(), None);
    assert_eq!(mark, LoadMark::Absent);
    assert_eq!(mark.source(), Source::User);
    assert_eq!(
        classify(ip("10.1.1.1"), &loopback(), None),
        LoadMark::Absent
    );
}

#[test]
fn an_untrusted_peer_is_stripped_whatever_it_sends() {
    let trusted = loopback();
    for value in [&b"load-1"[..], b"", b"bad value!"] {
        let mark = classify(ip("10.0.0.5"), &trusted, Some(value));
        assert_eq!(mark, LoadMark::Strip(Stripped::Untrusted));
        assert_eq!(mark.source(), Source::User);
    }
    assert_eq!(
        classify(ip("::2"), &trusted, Some(b"load-1")),
        LoadMark::Strip(Stripped::Untrusted)
    );
    // No IP address (a Unix socket): not trusted.
    assert_eq!(
        classify(None, &trusted, Some(b"load-1")),
        LoadMark::Strip(Stripped::Untrusted)
    );
    // No range at all trusts nobody.
    assert_eq!(
        classify(ip("127.0.0.1"), &[], Some(b"load-1")),
        LoadMark::Strip(Stripped::Untrusted)
    );
}

#[test]
fn an_invalid_run_id_from_a_trusted_peer_is_stripped() {
    let trusted = loopback();
    let long = "a".repeat(MAX_RUN_ID + 1);
    let edge = "a".repeat(MAX_RUN_ID);
    for value in [
        &b""[..],
        b"a b",
        b"a/b",
        b"caf\xc3\xa9",
        b"x\x00",
        long.as_bytes(),
    ] {
        assert_eq!(
            classify(ip("127.0.0.1"), &trusted, Some(value)),
            LoadMark::Strip(Stripped::Invalid),
            "{value:?}"
        );
    }
    assert_eq!(
        classify(ip("127.0.0.1"), &trusted, Some(edge.as_bytes())),
        LoadMark::Load(edge.as_str())
    );
}

#[test]
fn ipv4_mapped_peers_match_ipv4_ranges() {
    let trusted = vec![Cidr::parse("10.0.0.0/8").unwrap()];
    assert_eq!(
        classify(ip("::ffff:10.2.3.4"), &trusted, Some(b"r1")),
        LoadMark::Load("r1")
    );
    assert_eq!(
        classify(ip("::ffff:11.2.3.4"), &trusted, Some(b"r1")),
        LoadMark::Strip(Stripped::Untrusted)
    );
    // The mapped loopback is loopback.
    assert!(Cidr::LOOPBACK_V4.contains(ip("::ffff:127.0.0.1").unwrap()));
    assert!(!Cidr::LOOPBACK_V6.contains(ip("::ffff:127.0.0.1").unwrap()));
}

#[test]
fn ipv6_ranges() {
    let c = Cidr::parse("fd00:ab::/32").unwrap();
    assert!(c.contains(ip("fd00:ab:ffff::1").unwrap()));
    assert!(!c.contains(ip("fd00:ac::1").unwrap()));
    assert!(!c.contains(ip("10.0.0.1").unwrap()));
    let all = Cidr::parse("::/0").unwrap();
    assert!(all.contains(ip("2001:db8::1").unwrap()));
    let all4 = Cidr::parse("0.0.0.0/0").unwrap();
    assert!(all4.contains(ip("192.168.1.1").unwrap()));
    assert!(all4.contains(ip("::ffff:192.168.1.1").unwrap()));
}

#[test]
fn cidr_parse_and_its_errors() {
    assert_eq!(Cidr::parse("127.0.0.0/8").unwrap(), Cidr::LOOPBACK_V4);
    assert_eq!(Cidr::parse("::1").unwrap(), Cidr::LOOPBACK_V6);
    assert_eq!(Cidr::parse("10.1.2.3").unwrap().to_string(), "10.1.2.3/32");
    assert_eq!(
        Cidr::parse("10.0.0.0/33").unwrap_err(),
        "`10.0.0.0/33`: the prefix length must be a number from 0 to 32"
    );
    assert_eq!(
        Cidr::parse("::/x").unwrap_err(),
        "`::/x`: the prefix length must be a number from 0 to 128"
    );
    assert_eq!(
        Cidr::parse("10.0.0.1/8").unwrap_err(),
        "`10.0.0.1/8` has address bits set past the prefix; the range is 10.0.0.0/8"
    );
    assert_eq!(
        Cidr::parse("localhost/8").unwrap_err(),
        "`localhost/8` is not an address range like 10.0.0.0/8 or fd00::/8"
    );
}

#[test]
fn source_labels_are_two() {
    assert_eq!(Source::ALL.map(Source::label), ["user", "load"]);
    assert_eq!(Source::Load.index(), 1);
}
