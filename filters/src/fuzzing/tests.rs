//! Every seed and every saved crash input of the fuzz targets in `fuzz/`,
//! replayed through the same checks on stable: the regressions of the
//! fuzzers run with the ordinary test suite.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use super::*;

/// Every file of the target's corpus and regressions through `check`.
fn replay(target: &str, check: fn(&[u8]) -> Verdict) -> usize {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    super::replay(&fuzz, target, check).unwrap()
}

#[test]
fn the_meter_corpus_holds() {
    assert!(replay("meter", meter) >= 8);
}

#[test]
fn the_resp_request_corpus_holds() {
    assert!(replay("resp_request", resp_request) > 0);
}

#[test]
fn the_resp_reply_corpus_holds() {
    assert!(replay("resp_reply", resp_reply) > 0);
}

#[test]
fn the_fault_headers_corpus_holds() {
    assert!(replay("fault_headers", fault_headers) > 0);
}

#[test]
fn the_request_scan_corpus_holds() {
    assert!(replay("request_scan", request_scan) > 0);
}

#[test]
fn the_head_scan_corpus_holds() {
    assert!(replay("head_scan", head_scan) > 0);
}

#[test]
fn framed_inputs_cut_inside_their_body() {
    let f = Framed::read(&[3, 0xff, 0xff, 2, 0, 1, 0, b'a', b'b', b'c']);
    assert_eq!(f.selector, 3);
    assert_eq!(f.body, b"abc");
    // 65535 % 4 = 3, 2, 1: sorted.
    assert_eq!(f.cuts, vec![1, 2, 3]);
    assert_eq!(f.pieces(), vec![&b"a"[..], b"b", b"c", b""]);
    // Too short for a header: all header, an empty body.
    let short = Framed::read(&[9, 1]);
    assert_eq!((short.selector, short.body), (9, &b""[..]));
}
