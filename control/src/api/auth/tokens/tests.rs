#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use super::*;

fn headers(authorization: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(AUTHORIZATION, authorization.parse().unwrap());
    h
}

fn file(name: &str, text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("sluice-{name}-{}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_bare_token_file_is_one_admin_token_named_default() {
    let tokens = parse_token_file("\n  s3cret \n").unwrap();
    assert_eq!(format!("{tokens:?}"), "[Token(default admin)]");
    assert_eq!(tokens[0].secret, "s3cret");
}

#[test]
fn a_token_file_of_lines_names_each_token_and_its_scope() {
    let text = "# who may call\nci read aaa\n\nops   write bbb\nroot admin ccc\n";
    let tokens = parse_token_file(text).unwrap();
    assert_eq!(
        format!("{tokens:?}"),
        "[Token(ci read), Token(ops write), Token(root admin)]"
    );
}

#[test]
fn a_bad_token_file_says_which_line_and_what_is_wrong() {
    let cases = [
        ("", "no tokens"),
        ("# only a comment\n", "no tokens"),
        (
            "ci read aaa\nops bbb\n",
            "line 2: expected `name scope token`, found 2 fields",
        ),
        (
            "ci read aaa\nops root bbb\n",
            "line 2: unknown scope `root` (expected one of read, write, admin)",
        ),
        (
            "c/i read aaa\nops admin bbb",
            "line 1: `c/i` is not a valid name (letters, digits, `-`, `_`, `.`)",
        ),
        (
            "ci read aaa extra\n",
            "line 1: expected `name scope token`, found 4 fields",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(parse_token_file(text).unwrap_err(), want, "{text:?}");
    }
}

#[test]
fn names_and_secrets_are_unique_in_a_set() {
    let twice = vec![
        Token::new("ci", Scope::Read, "a"),
        Token::new("ci", Scope::Admin, "b"),
    ];
    assert_eq!(Tokens::new(twice).unwrap_err(), "duplicate token name `ci`");
    let same = vec![
        Token::new("ci", Scope::Read, "a"),
        Token::new("ops", Scope::Admin, "a"),
    ];
    assert_eq!(
        Tokens::new(same).unwrap_err(),
        "tokens `ci` and `ops` have the same secret"
    );
}

#[test]
fn the_bearer_finds_its_token_among_several() {
    let tokens = Tokens::new(vec![
        Token::new("ci", Scope::Read, "aaa"),
        Token::new("ops", Scope::Write, "bbb"),
    ])
    .unwrap();
    assert_eq!(
        tokens.find(&headers("Bearer bbb")),
        Presented::Known("ops", Scope::Write)
    );
    assert_eq!(
        tokens.find(&headers("bearer  aaa ")),
        Presented::Known("ci", Scope::Read)
    );
    assert_eq!(tokens.find(&headers("Bearer aa")), Presented::Wrong);
    assert_eq!(tokens.find(&headers("Bearer ")), Presented::Wrong);
    assert_eq!(tokens.find(&headers("Basic aaa")), Presented::Missing);
    assert_eq!(tokens.find(&HeaderMap::new()), Presented::Missing);
    assert_eq!(tokens.first_admin(), None);
}

#[test]
fn sources_load_into_one_set_or_say_what_failed() {
    let var = format!("SLUICE_TEST_TOKEN_{}", std::process::id());
    let env = TokenSource::Env {
        name: DEFAULT_NAME.into(),
        scope: Scope::Admin,
        var: var.clone(),
    };
    let missing = load(std::slice::from_ref(&env)).unwrap_err();
    assert_eq!(
        missing,
        format!("admin token variable `{var}`: environment variable not found")
    );
    std::env::set_var(&var, " ");
    assert_eq!(
        load(std::slice::from_ref(&env)).unwrap_err(),
        format!("admin token variable `{var}` is empty")
    );
    std::env::set_var(&var, "from-env");
    let secret = file("secret", "from-secret\n");
    let lines = file("lines", "ci read from-lines\n");
    let sources = [
        env,
        TokenSource::Secret {
            name: "ops".into(),
            scope: Scope::Write,
            path: secret.clone(),
        },
        TokenSource::File(lines.clone()),
    ];
    let (tokens, generated) = load(&sources).unwrap();
    assert!(!generated);
    assert_eq!(tokens.names(), ["default", "ops", "ci"]);
    assert_eq!(tokens.first_admin(), Some("from-env"));
    std::fs::write(&lines, "ci read from-lines\nops admin other\n").unwrap();
    assert_eq!(load(&sources).unwrap_err(), "duplicate token name `ops`");
    std::fs::write(&lines, "ci reader x\n").unwrap();
    assert_eq!(
        load(&sources).unwrap_err(),
        format!(
            "admin token file {}: line 1: unknown scope `reader` (expected one of read, write, admin)",
            lines.display()
        )
    );
    std::env::remove_var(&var);
    std::fs::remove_file(&secret).unwrap();
    std::fs::remove_file(&lines).unwrap();
}

#[test]
fn no_source_generates_one_admin_token() {
    let (a, generated) = load(&[]).unwrap();
    let (b, _) = load(&[]).unwrap();
    assert!(generated);
    let a = a.first_admin().unwrap().to_string();
    assert_eq!(a.len(), 32);
    assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(Some(a.as_str()), b.first_admin());
}
