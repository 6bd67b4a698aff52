// Tests may spawn bare tasks (each test's runtime ends with it).
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::header::AUTHORIZATION;
use tokio_util::sync::CancellationToken;

use super::*;

fn bearer(token: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
    h
}

fn auth(tokens: Vec<Token>) -> (Auth, Registry) {
    let registry = Registry::new();
    let auth = Auth::new(Vec::new(), Tokens::new(tokens).unwrap(), &registry).unwrap();
    (auth, registry)
}

fn counter(auth: &Auth, reason: &str) -> u64 {
    auth.metrics.failures.with_label_values(&[reason]).get()
}

const PEER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
const OTHER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

#[test]
fn scopes_nest_admin_over_write_over_read() {
    use Scope::*;
    for (have, needed, allowed) in [
        (Read, Read, true),
        (Read, Write, false),
        (Read, Admin, false),
        (Write, Read, true),
        (Write, Write, true),
        (Write, Admin, false),
        (Admin, Read, true),
        (Admin, Write, true),
        (Admin, Admin, true),
    ] {
        assert_eq!(have.allows(needed), allowed, "{have} for {needed}");
    }
}

#[test]
fn a_known_token_is_its_caller_and_too_small_a_scope_is_403() {
    let (auth, _) = auth(vec![Token::new("ci", Scope::Read, "aaa")]);
    let caller = auth.admit(PEER, &bearer("aaa"), Instant::now()).unwrap();
    assert_eq!(
        caller,
        Caller {
            name: "ci".into(),
            scope: Scope::Read
        }
    );
    assert!(auth.permit(&caller, Scope::Read, "GET /v1/routes").is_ok());
    let refused = auth
        .permit(&caller, Scope::Admin, "PUT /v1/config")
        .unwrap_err();
    assert_eq!(
        refused,
        Refused::Forbidden {
            error: "token `ci` has scope read; PUT /v1/config needs scope admin".into(),
            needed: Scope::Admin
        }
    );
    assert_eq!(refused.answer().status(), StatusCode::FORBIDDEN);
    assert_eq!(counter(&auth, "scope"), 1);
}

#[test]
fn ten_failures_block_the_peer_even_with_a_right_token_and_no_other() {
    let (auth, _) = auth(vec![Token::new("ops", Scope::Admin, "right")]);
    let now = Instant::now();
    for i in 0..FAILURE_LIMIT.max_failures {
        let refused = auth.admit(PEER, &bearer("wrong"), now).unwrap_err();
        assert_eq!(refused, Refused::Unauthorized, "failure {i}");
    }
    assert_eq!(counter(&auth, "wrong_token"), 10);
    let refused = auth.admit(PEER, &bearer("right"), now).unwrap_err();
    assert_eq!(refused, Refused::Blocked(FAILURE_LIMIT.block));
    let answer = refused.answer();
    assert_eq!(answer.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(answer.headers()["retry-after"], "60");
    assert_eq!(auth.metrics.refusals.get(), 1);
    assert!(auth.admit(OTHER, &bearer("right"), now).is_ok());
    let later = now + FAILURE_LIMIT.block;
    assert!(auth.admit(PEER, &bearer("right"), later).is_ok());
    auth.admit(PEER, &HeaderMap::new(), later).unwrap_err();
    assert_eq!(counter(&auth, "missing_token"), 1);
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("sluice-auth-{name}-{}", std::process::id()))
}

/// Polls `admit` with `token` until it gives `want` (true: admitted), for
/// at most `within`.
async fn admitted_within(auth: &Auth, token: &str, want: bool, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        // A fresh peer each time, so that the failures expected while
        // waiting never block the address asking.
        static NEXT: AtomicU32 = AtomicU32::new(1);
        let peer = IpAddr::from(std::net::Ipv4Addr::from(
            NEXT.fetch_add(1, Ordering::Relaxed),
        ));
        let got = auth.admit(peer, &bearer(token), Instant::now()).is_ok();
        if got == want {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_edited_token_file_rotates_within_a_second_and_a_bad_edit_keeps_the_last_good() {
    let path = temp("rotate");
    std::fs::write(&path, "ci read old-secret\nops admin ops-secret\n").unwrap();
    let sources = vec![TokenSource::File(path.clone())];
    let (tokens, _) = load_tokens(&sources).unwrap();
    let registry = Registry::new();
    let auth = Arc::new(Auth::new(sources, tokens, &registry).unwrap());
    let cancel = CancellationToken::new();
    let task = tokio::spawn(watch_token_files(auth.clone(), cancel.clone()));
    let second = Duration::from_secs(1);
    assert!(admitted_within(&auth, "old-secret", true, Duration::ZERO).await);

    std::fs::write(&path, "ci read new-secret\nops admin ops-secret\n").unwrap();
    assert!(admitted_within(&auth, "old-secret", false, second).await);
    assert!(admitted_within(&auth, "new-secret", true, Duration::ZERO).await);

    std::fs::write(&path, "ci reader broken\n").unwrap();
    let errors = || auth.metrics.reload_errors.get();
    let deadline = Instant::now() + second;
    while errors() == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(errors(), 1);
    assert!(admitted_within(&auth, "new-secret", true, Duration::ZERO).await);
    assert!(admitted_within(&auth, "ops-secret", true, Duration::ZERO).await);

    std::fs::remove_file(&path).unwrap();
    let deadline = Instant::now() + second;
    while errors() == 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(errors(), 2, "an unreadable file is an error too");
    assert!(admitted_within(&auth, "new-secret", true, Duration::ZERO).await);
    cancel.cancel();
    task.await.unwrap();
}
