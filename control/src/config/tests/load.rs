use sluice_filters::Cidr;

use super::*;

#[test]
fn trusted_peers_default_to_loopback() {
    let c = Config::from_yaml(GOOD).unwrap();
    assert_eq!(c.load.trusted_peers, [Cidr::LOOPBACK_V4, Cidr::LOOPBACK_V6]);
    let c = Config::from_yaml(&format!("{GOOD}load: {{}}\n")).unwrap();
    assert_eq!(c.load, LoadConfig::default());
    let ranges: Vec<String> = c
        .load
        .trusted_peers
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(ranges, ["127.0.0.0/8", "::1/128"]);
}

#[test]
fn trusted_peers_as_written_replace_the_default() {
    let c = Config::from_yaml(&format!(
        "{GOOD}load: {{ trusted_peers: [10.0.0.0/8, 'fd00::/8', 192.168.1.7] }}\n"
    ))
    .unwrap();
    let ranges: Vec<String> = c
        .load
        .trusted_peers
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(ranges, ["10.0.0.0/8", "fd00::/8", "192.168.1.7/32"]);
    // An empty list trusts nobody: every mark is stripped.
    let c = Config::from_yaml(&format!("{GOOD}load: {{ trusted_peers: [] }}\n")).unwrap();
    assert!(c.load.trusted_peers.is_empty());
}

#[test]
fn every_bad_range_is_named() {
    let errors = errors_in(&format!(
        "{GOOD}load: {{ trusted_peers: [127.0.0.0/8, 10.0.0.1/8, 'fd00::/129', nope, 1.2.3.4/x] }}\n"
    ));
    assert_eq!(
        errors,
        [
            "load.trusted_peers[1]: `10.0.0.1/8` has address bits set past the prefix; the range is 10.0.0.0/8",
            "load.trusted_peers[2]: `fd00::/129`: the prefix length must be a number from 0 to 128",
            "load.trusted_peers[3]: `nope` is not an address range like 10.0.0.0/8 or fd00::/8",
            "load.trusted_peers[4]: `1.2.3.4/x`: the prefix length must be a number from 0 to 32",
        ]
    );
}

#[test]
fn unknown_keys_and_bad_shapes_are_named() {
    let errors = errors_in(&format!("{GOOD}load: {{ trusted: [] }}\n"));
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0]
            .starts_with("load.trusted: unknown field `trusted`, expected `trusted_peers` at line"),
        "{errors:?}"
    );
    let errors = errors_in(&format!("{GOOD}load: {{ trusted_peers: 10.0.0.0/8 }}\n"));
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].starts_with(
            "load.trusted_peers: invalid type: string \"10.0.0.0/8\", expected a sequence"
        ),
        "{errors:?}"
    );
}
