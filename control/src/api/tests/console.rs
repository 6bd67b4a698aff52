//! The console's files: served without a token, with their media types, the
//! page under its content security policy, and each file the page names is
//! one the API serves; the data behind them still needs the token.

use super::*;

#[tokio::test]
async fn the_console_is_served_without_a_token_and_its_data_is_not() {
    let s = Server::start().await;
    let (status, headers, page) = s.call(Method::GET, "/ui", None, "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    let policy = headers["content-security-policy"].to_str().unwrap();
    assert!(policy.starts_with("default-src 'self';"), "{policy}");
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    assert_eq!(headers["cache-control"], "no-cache");
    let page = String::from_utf8(page.to_vec()).unwrap();
    // Nothing inline (the policy would block it) and nothing from elsewhere.
    assert!(!page.contains("<style") && !page.contains("http"), "{page}");
    for (path, media, name) in [
        (
            "/ui/console.js",
            "text/javascript; charset=utf-8",
            "console.js",
        ),
        ("/ui/console.css", "text/css; charset=utf-8", "console.css"),
        ("/ui/favicon.svg", "image/svg+xml", "favicon.svg"),
    ] {
        assert!(
            page.contains(&format!("\"{path}\"")),
            "{path} not in {page}"
        );
        let (status, headers, body) = s.call(Method::GET, path, None, "").await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert_eq!(headers["content-type"], media, "{path}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        let built = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("ui/dist")
            .join(name);
        assert_eq!(body, std::fs::read(built).unwrap(), "{path}");
    }
    // What the page reads is behind the token as before.
    let (status, _, _) = s.call(Method::GET, "/v1/stats", None, "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, headers, _) = s.call(Method::POST, "/ui", None, "").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(headers["allow"], "GET");
    let (status, _, _) = s.call(Method::GET, "/ui/other.js", None, "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
