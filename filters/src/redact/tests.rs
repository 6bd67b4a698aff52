#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rand::rngs::StdRng;
use rand::SeedableRng;
use regex::Regex;

use super::corpus::{self, KINDS};
use super::*;

fn redactor() -> Redactor {
    let config = RedactionConfig {
        patterns: vec!["EMP-[0-9]{6}".into(), "member=([a-z]{5,})".into()],
        drop_keys: vec!["user".into(), "Customer_Ref".into()],
    };
    Redactor::new(&config, Secret::new(b"test key".to_vec())).unwrap()
}

/// `text` with every token replaced by `<kind>`, for exact assertions.
fn shape(text: &str) -> String {
    let token = Regex::new("<([a-z_]+):[0-9a-f]{8,}>").unwrap();
    token.replace_all(text, "<$1>").into_owned()
}

#[test]
fn each_kind_is_found_and_its_context_kept() {
    let r = redactor();
    let cases = [
        ("mail alice@example.com now", "mail <email> now"),
        ("call +44 20 7946 0958 today", "call <phone> today"),
        ("call (415) 555-0132.", "call <phone>."),
        ("card 4111 1111 1111 1111 cvv", "card <card> cvv"),
        ("card 4111111111111111 123", "card <card> 123"),
        ("iban DE89 3704 0044 0532 0130 00 ok", "iban <iban> ok"),
        ("iban GB82WEST12345698765432.", "iban <iban>."),
        ("from 10.1.2.3:8080", "from <ip>:8080"),
        ("via 2001:db8::8a2e:370:7334, then", "via <ip>, then"),
        (
            "key sk-abcdefghijklmnopqrstuvwxyz012345 x",
            "key <api_key> x",
        ),
        ("AKIAIOSFODNN7EXAMPLE", "<api_key>"),
        (
            "Authorization: Bearer abc.def-ghi_jkl",
            "Authorization: Bearer <bearer>",
        ),
        ("password=hunter2hunter2;", "password=<credential>;"),
        ("ssn 123-45-6789", "ssn <national_id>"),
        ("NI number AB 12 34 56 C", "NI number <national_id>"),
        (
            "passport number X12345678 expires",
            "passport number <national_id> expires",
        ),
        (
            "sha 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "sha <secret>",
        ),
        ("tok AbCdEf1234GhIjKl5678MnOpQr9012StUvWx", "tok <secret>"),
        (
            "EMP-123456 and member=jsmith",
            "<custom> and member=<custom>",
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(shape(&r.redact_str(input)), expected, "{input}");
    }
}

#[test]
fn look_alikes_are_kept() {
    let r = redactor();
    for text in [
        "upgrade to v1.14.2 or 2.0.0-beta.1",
        "Python 3.11.4 on 2024-05-01T12:30:00Z at 12:30:45",
        "version 1.2.3.4.5 of the spec",
        "ts 1714567890 and 1714567890123 ms",
        "ISBN 978-3-16-148410-0, 12,345,678 people, $1,234.56, 99.9%",
        "commit a1b2c3d, color #ff8800, model mistralai/Mixtral-8x7B-Instruct-v0.1",
        "see /Users/JohnSmith/Documents/Project2024/src/main.rs",
        "call getUserAccountBalanceForCustomer2024 in std::vector and a::b",
        "id 550e8400-e29b-41d4-a716-446655440000",
    ] {
        assert_eq!(r.redact_str(text), text);
    }
}

#[test]
fn tokens_are_keyed_joinable_and_as_long_as_the_value() {
    let r = redactor();
    let out = r.redact_str("a@example.com wrote to b@example.com, then a@example.com again");
    let tokens: Vec<&str> = Regex::new("<email:[0-9a-f]+>")
        .unwrap()
        .find_iter(&out)
        .map(|m| m.as_str())
        .collect();
    assert_eq!(tokens.len(), 3);
    assert_eq!(tokens[0], tokens[2]);
    assert_ne!(tokens[0], tokens[1]);
    let other = Redactor::new(&RedactionConfig::default(), Secret::new(b"other".to_vec())).unwrap();
    assert_ne!(
        other.redact_str("a@example.com"),
        r.redact_str("a@example.com")
    );
    // As long as what it replaces, or the shortest token.
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
    assert_eq!(r.redact_str(jwt).chars().count(), jwt.chars().count());
    assert_eq!(
        r.redact_str("1.2.3.4").chars().count(),
        "<ip:12345678>".len()
    );
}

#[test]
fn json_bodies_are_rewritten_in_place() {
    let r = redactor();
    let clean = b"{ \"model\" : \"m\",\n  \"z\": [1, 2.5e3, true, null], \"a\": \"\\u00e9\" }";
    assert_eq!(r.redact_json(clean).unwrap(), clean.to_vec());

    let body = br#"{"messages":[{"role":"user","content":"mail \"a@example.com\"\n"}],"seed":-123456789012.5,"n":12345678}"#;
    let out = String::from_utf8(r.redact_json(body).unwrap()).unwrap();
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        shape(value["messages"][0]["content"].as_str().unwrap()),
        "mail \"<email>\"\n"
    );
    let seed = value["seed"].as_f64().unwrap();
    assert!(
        seed < -1e11 && seed > -1e12 && seed != -123456789012.5,
        "{seed}"
    );
    assert!(out.ends_with(r#".5,"n":12345678}"#), "{out}");

    // Dropped keys at any depth, whatever their value; keys are redacted too.
    let body = br#"{"user":"u-123","meta":{"customer_ref":{"id":[1,2]},"x@example.com":1}}"#;
    let out = String::from_utf8(r.redact_json(body).unwrap()).unwrap();
    assert_eq!(
        shape(&out),
        r#"{"user":"<dropped>","meta":{"customer_ref":"<dropped>","<email>":1}}"#
    );
    assert!(matches!(
        r.redact_json(b"{\"cut\": \"at 64 Ki"),
        Err(RedactError::NotJson(_))
    ));
}

#[test]
fn bad_custom_patterns_are_refused() {
    let secret = || Secret::new(b"k".to_vec());
    let config = |p: &str| RedactionConfig {
        patterns: vec!["ok".into(), p.into()],
        drop_keys: Vec::new(),
    };
    let err = Redactor::new(&config("a*"), secret()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "patterns[1]: `a*` matches the empty string"
    );
    let err = Redactor::new(&config("(unclosed"), secret()).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("patterns[1]: regex parse error"),
        "{err}"
    );
    assert_eq!(format!("{:?}", secret()), "Secret(..)");
}

#[test]
fn secret_headers() {
    for name in [
        "Authorization",
        "cookie",
        "X-Api-Key",
        "x-goog-api-key",
        "X-Auth-Token",
    ] {
        assert!(is_secret_header(name), "{name}");
    }
    for name in ["x-session-id", "content-type", "x-request-id"] {
        assert!(!is_secret_header(name), "{name}");
    }
}

/// A body for a secret of `kind`: numbers go in as JSON numbers and dropped
/// values under a dropped key; everything else in prose, by `shape`.
fn placed(rng: &mut StdRng, kind: &str, value: &str, shape: usize) -> String {
    match kind {
        "number" => format!(
            r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"metadata":{{"account":{value}}}}}"#
        ),
        "dropped" if shape.is_multiple_of(2) => {
            format!(r#"{{"model":"m","user":"{value}","prompt":"x"}}"#)
        }
        "dropped" => format!(r#"{{"input":{{"meta":{{"CUSTOMER_REF":["{value}",7]}}}}}}"#),
        _ => corpus::body(rng, value, shape),
    }
}

/// The original, and its forms as a JSON string and as JSON inside a JSON
/// string (tool-call arguments), none of which may be in the output.
fn forms(value: &str) -> Vec<String> {
    let once = serde_json::to_string(value).unwrap();
    let twice = serde_json::to_string(&once).unwrap();
    vec![
        value.to_owned(),
        once[1..once.len() - 1].to_owned(),
        twice[1..twice.len() - 1].to_owned(),
    ]
}

#[test]
fn no_secret_of_the_corpus_survives() {
    let r = redactor();
    let mut rng = StdRng::seed_from_u64(13);
    let mut per_kind = std::collections::BTreeMap::<&str, usize>::new();
    let mut total = 0;
    for i in 0..(KINDS * 140) {
        let (kind, value) = corpus::secret(&mut rng, i % KINDS);
        let body = placed(&mut rng, kind, &value, i / KINDS);
        let out = r.redact_json(body.as_bytes()).unwrap();
        let out = String::from_utf8(out).unwrap();
        serde_json::from_str::<serde::de::IgnoredAny>(&out).unwrap();
        for form in forms(&value) {
            assert!(!out.contains(&form), "{kind} `{value}` survived in {out}");
        }
        // Phone and card digits may not survive reformatted either.
        if matches!(kind, "card" | "phone") {
            let bare: String = value.chars().filter(char::is_ascii_digit).collect();
            assert!(
                !out.contains(&bare[..bare.len().min(12)]),
                "{kind} `{value}`: {out}"
            );
        }
        *per_kind.entry(kind).or_default() += 1;
        total += 1;
    }
    assert!(total >= 2000, "{total}");
    assert_eq!(per_kind.len(), KINDS, "{per_kind:?}");
}

#[test]
fn look_alikes_of_the_corpus_are_kept() {
    let r = redactor();
    let mut rng = StdRng::seed_from_u64(31);
    let (mut kept, mut total, mut lost) = (0, 0, Vec::new());
    for i in 0..2000 {
        let value = corpus::look_alike(&mut rng);
        let body = corpus::body(&mut rng, &value, i);
        let out = String::from_utf8(r.redact_json(body.as_bytes()).unwrap()).unwrap();
        total += 1;
        if forms(&value).iter().any(|f| out.contains(f.as_str())) {
            kept += 1;
        } else if lost.len() < 10 {
            lost.push(value);
        }
    }
    let share = f64::from(kept) / f64::from(total);
    assert!(share >= 0.95, "kept {kept} of {total}; lost e.g. {lost:?}");
}
