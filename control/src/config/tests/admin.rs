//! `admin`: the token forms (`token_env`, `token_file`, `tokens`), TLS and
//! the audit file, and every error with its path.

use std::path::PathBuf;

use super::*;

const ADMIN: &str = "admin: { listen: 127.0.0.1:9901, token_env: SLUICE_ADMIN_TOKEN }";

fn with_admin(body: &str) -> String {
    GOOD.replacen(ADMIN, &format!("admin:\n{body}"), 1)
}

#[test]
fn named_tokens_sit_beside_a_token_file_with_their_scopes() {
    let c = Config::from_yaml(&with_admin(
        "  token_file: /etc/sluice/tokens\n  tokens:\n\
         \x20   - { name: ci, scope: read, env: CI_TOKEN }\n\
         \x20   - { name: ops, scope: write, file: /etc/sluice/ops }\n",
    ))
    .unwrap();
    assert_eq!(
        c.admin.tokens,
        [
            TokenSource::File(PathBuf::from("/etc/sluice/tokens")),
            TokenSource::Env {
                name: "ci".into(),
                scope: Scope::Read,
                var: "CI_TOKEN".into()
            },
            TokenSource::Secret {
                name: "ops".into(),
                scope: Scope::Write,
                path: PathBuf::from("/etc/sluice/ops")
            },
        ]
    );
    assert_eq!(c.admin.tls, None);
    assert_eq!(c.admin.audit_file, None);
}

#[test]
fn tls_and_the_audit_file_are_paths() {
    let c = Config::from_yaml(&with_admin(
        "  token_env: T\n  tls: { cert: c.pem, key: k.pem, client_ca: ca.pem }\n\
         \x20 audit_file: /var/log/sluice-audit.jsonl\n",
    ))
    .unwrap();
    let tls = c.admin.tls.unwrap();
    assert_eq!(tls.cert, PathBuf::from("c.pem"));
    assert_eq!(tls.key, PathBuf::from("k.pem"));
    assert_eq!(tls.client_ca, Some(PathBuf::from("ca.pem")));
    assert_eq!(
        c.admin.audit_file,
        Some(PathBuf::from("/var/log/sluice-audit.jsonl"))
    );
}

#[test]
fn a_bad_token_is_named_with_its_path() {
    let yaml = with_admin(
        "  tokens:\n\
         \x20   - { name: ci, scope: read, env: CI_TOKEN }\n\
         \x20   - { name: ops, scope: root, env: OPS }\n\
         \x20   - { name: ci, scope: admin, file: f }\n\
         \x20   - { name: both, scope: read, env: A, file: f }\n\
         \x20   - { name: none, scope: write }\n\
         \x20   - { name: 'a b', scope: read, env: '' }\n\
         \x20 tls: { cert: '', key: k.pem }\n\
         \x20 audit_file: ''\n",
    );
    assert_eq!(
        errors_in(&yaml),
        [
            "admin.tokens[1].scope: unknown scope `root` (expected one of read, write, admin)",
            "admin.tokens[2].name: duplicate token `ci` (first at admin.tokens[0].name)",
            "admin.tokens[3]: set env or file, not both",
            "admin.tokens[4]: set env or file: where the token's secret is",
            "admin.tokens[5].name: `a b` is not a valid name (letters, digits, `-`, `_`, `.`)",
            "admin.tokens[5].env: must name an environment variable",
            "admin.tls.cert: must name a PEM file",
            "admin.audit_file: must name a file",
        ]
    );
}

#[test]
fn an_unknown_key_in_a_token_or_tls_is_refused() {
    let e = errors_in(&with_admin(
        "  tokens: [{ name: ci, scope: read, env: A, secret: x }]\n",
    ));
    assert!(
        e[0].starts_with("admin.tokens[0].secret: unknown field `secret`"),
        "{e:?}"
    );
    let e = errors_in(&with_admin(
        "  token_env: T\n  tls: { cert: c, key: k, ca: x }\n",
    ));
    assert!(
        e[0].starts_with("admin.tls.ca: unknown field `ca`"),
        "{e:?}"
    );
}

#[test]
fn named_tokens_alone_allow_a_non_loopback_listener() {
    let yaml =
        with_admin("  listen: 0.0.0.0:9901\n  tokens: [{ name: ci, scope: read, env: A }]\n");
    assert!(Config::from_yaml(&yaml).is_ok());
    assert_eq!(
        errors_in(&with_admin("  listen: 0.0.0.0:9901\n  token_file: ''\n")),
        ["admin.token_file: must name a file"]
    );
}

#[test]
fn toxiproxy_listens_on_loopback_only_with_a_bounded_ttl() {
    let c = Config::from_yaml(&with_admin(
        "  token_env: T\n  toxiproxy: 127.0.0.1:8474\n  toxiproxy_default_ttl: 10m\n",
    ))
    .unwrap();
    assert_eq!(c.admin.toxiproxy, Some("127.0.0.1:8474".parse().unwrap()));
    assert_eq!(
        c.admin.toxiproxy_default_ttl,
        std::time::Duration::from_secs(600)
    );
    let defaults = Config::from_yaml(&with_admin("  token_env: T\n")).unwrap();
    assert_eq!(defaults.admin.toxiproxy, None);
    assert_eq!(
        defaults.admin.toxiproxy_default_ttl,
        std::time::Duration::from_secs(3600)
    );
    assert_eq!(
        errors_in(&with_admin(
            "  token_env: T\n  toxiproxy: 0.0.0.0:8474\n  toxiproxy_default_ttl: 2h\n"
        )),
        [
            "admin.toxiproxy: 0.0.0.0:8474 is not a loopback address: Toxiproxy's API has no authentication",
            "admin.toxiproxy_default_ttl: `2h` is longer than the maximum 1h (runtime.max_fault_ttl)",
        ]
    );
    assert_eq!(
        errors_in(&with_admin("  token_env: T\n  toxiproxy: localhost\n")),
        ["admin.toxiproxy: `localhost` is not an address like 127.0.0.1:8080"]
    );
}
