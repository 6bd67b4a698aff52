//! `routes[].max_body` and `admin.max_body`: defaults, values, and every
//! error with its path.

use super::*;

const STICKY: &str = "    sticky: { header: X-Session-Id }\n";

fn with_route_max_body(value: &str) -> String {
    GOOD.replacen(STICKY, &format!("{STICKY}    max_body: {value}\n"), 1)
}

#[test]
fn a_route_takes_32_mib_unless_told_and_reads_sizes_as_bytes_or_text() {
    let c = Config::from_yaml(GOOD).unwrap();
    assert_eq!(c.routes[0].max_body, 32 << 20);
    assert_eq!(DEFAULT_ROUTE_MAX_BODY, 32 << 20);
    let c = Config::from_yaml(&with_route_max_body("64KiB")).unwrap();
    assert_eq!(c.routes[0].max_body, 64 << 10);
    let c = Config::from_yaml(&with_route_max_body("100")).unwrap();
    assert_eq!(c.routes[0].max_body, 100);
}

#[test]
fn a_bad_route_max_body_is_named_with_its_path() {
    assert_eq!(
        errors_in(&with_route_max_body("0")),
        ["routes[0].max_body: must be at least 1 byte"]
    );
    assert_eq!(
        errors_in(&with_route_max_body("lots")),
        ["routes[0].max_body: `lots` is not a size like 512KiB or 1MiB"]
    );
}

#[test]
fn a_bad_admin_max_body_says_the_range() {
    let admin = "admin: { listen: 127.0.0.1:9901, token_env: SLUICE_ADMIN_TOKEN }";
    let with_admin_max_body = |v: &str| {
        GOOD.replacen(
            admin,
            &admin.replace(" }", &format!(", max_body: {v} }}")),
            1,
        )
    };
    assert_eq!(
        errors_in(&with_admin_max_body("512")),
        ["admin.max_body: 512 bytes is not within 1KiB ..= 256MiB"]
    );
    let c = Config::from_yaml(&with_admin_max_body("1MiB")).unwrap();
    assert_eq!(c.admin.max_body, 1 << 20);
}
