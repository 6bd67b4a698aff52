//! Seeded generators for the redaction tests: secrets of every kind, the
//! look-alikes that must survive, and realistic request bodies to put them
//! in (chat messages, content parts, nested tool-call arguments).

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::Rng;

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const BASE64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const UPPER_DIGIT: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const NAMES: &[&str] = &[
    "alice",
    "bob.smith",
    "j.doe",
    "maria_garcia",
    "chen.wei+news",
];
const DOMAINS: &[&str] = &[
    "example.com",
    "mail.example.org",
    "corp.example.co.uk",
    "ex.io",
];

fn pick(rng: &mut StdRng, alphabet: &[u8], n: usize) -> String {
    (0..n)
        .map(|_| char::from(alphabet[rng.random_range(0..alphabet.len())]))
        .collect()
}

fn digits(rng: &mut StdRng, n: usize) -> String {
    pick(rng, b"0123456789", n)
}

fn hex(rng: &mut StdRng, n: usize) -> String {
    pick(rng, b"0123456789abcdef", n)
}

/// A secret of generator `kind` (0..KINDS), and the name of its kind.
pub(super) const KINDS: usize = 16;

pub(super) fn secret(rng: &mut StdRng, kind: usize) -> (&'static str, String) {
    match kind {
        0 => (
            "email",
            format!(
                "{}{}@{}",
                NAMES.choose(rng).copied().unwrap_or("a"),
                rng.random_range(1..999),
                DOMAINS.choose(rng).copied().unwrap_or("example.com")
            ),
        ),
        1 => ("phone", phone(rng)),
        2 => ("card", card(rng)),
        3 => ("iban", iban(rng)),
        4 => (
            "ipv4",
            format!(
                "{}.{}.{}.{}",
                rng.random_range(1..=223),
                rng.random_range(0..=255),
                rng.random_range(0..=255),
                rng.random_range(1..=254)
            ),
        ),
        5 => ("ipv6", ipv6(rng)),
        6 => ("jwt", jwt(rng)),
        7 => ("api_key", api_key(rng)),
        8 => ("bearer", format!("Bearer {}", pick(rng, BASE64URL, 40))),
        9 => {
            let n = *[32, 40, 64].choose(rng).unwrap_or(&40);
            ("hex", hex(rng, n))
        }
        10 => {
            let n = rng.random_range(32..90);
            let alphabet = if rng.random_bool(0.5) {
                BASE64
            } else {
                BASE64URL
            };
            ("base64", pick(rng, alphabet, n))
        }
        11 => ("national_id", national_id(rng)),
        12 => {
            let n = rng.random_range(8..20);
            let value = pick(rng, ALNUM, n);
            (
                "credential",
                format!(
                    "{}={}",
                    ["password", "api_key", "client_secret", "passwd"]
                        .choose(rng)
                        .copied()
                        .unwrap_or("password"),
                    value
                ),
            )
        }
        13 => ("custom", format!("EMP-{}", digits(rng, 6))),
        // Placed as a JSON number, and as the value of a dropped key.
        14 => {
            let (first, n) = (rng.random_range(1..=9), rng.random_range(8..15));
            ("number", format!("{first}{}", digits(rng, n)))
        }
        _ => ("dropped", format!("ref-{}", pick(rng, ALNUM, 10))),
    }
}

fn phone(rng: &mut StdRng) -> String {
    let (a, b, c) = (digits(rng, 3), digits(rng, 3), digits(rng, 4));
    match rng.random_range(0..8) {
        0 => format!("+1 {a} {b} {c}"),
        1 => format!("+1 ({a}) {b}-{c}"),
        2 => format!("({a}) {b}-{c}"),
        3 => format!("{}{}-{b}-{c}", rng.random_range(2..=9), digits(rng, 2)),
        4 => format!("{}{}.{b}.{c}", rng.random_range(2..=9), digits(rng, 2)),
        5 => format!("+44 20 {} {c}", digits(rng, 4)),
        6 => format!(
            "0{} {} {} {} {}",
            rng.random_range(1..=9),
            digits(rng, 2),
            digits(rng, 2),
            digits(rng, 2),
            digits(rng, 2)
        ),
        _ => format!("+49{}", digits(rng, 11)),
    }
}

fn luhn_complete(partial: &str) -> String {
    let sum: u32 = partial
        .bytes()
        .rev()
        .enumerate()
        .map(|(i, b)| {
            let d = u32::from(b - b'0');
            if i % 2 == 0 {
                let twice = d * 2;
                if twice > 9 {
                    twice - 9
                } else {
                    twice
                }
            } else {
                d
            }
        })
        .sum();
    format!("{partial}{}", (10 - sum % 10) % 10)
}

fn card(rng: &mut StdRng) -> String {
    let (prefix, len) = *[
        ("4", 16),
        ("51", 16),
        ("55", 16),
        ("2221", 16),
        ("37", 15),
        ("6011", 16),
    ]
    .choose(rng)
    .unwrap_or(&("4", 16));
    let body = format!("{prefix}{}", digits(rng, len - prefix.len() - 1));
    let number = luhn_complete(&body);
    match rng.random_range(0..4) {
        0 => number,
        1 | 2 => {
            let sep = if rng.random_bool(0.5) { " " } else { "-" };
            number
                .as_bytes()
                .chunks(4)
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .collect::<Vec<_>>()
                .join(sep)
        }
        // With the CVV right after it.
        _ => format!("{number} {}", digits(rng, 3)),
    }
}

fn iban(rng: &mut StdRng) -> String {
    let (country, bban) = match rng.random_range(0..4) {
        0 => ("DE", digits(rng, 18)),
        1 => (
            "GB",
            format!(
                "{}{}",
                pick(rng, b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", 4),
                digits(rng, 14)
            ),
        ),
        2 => (
            "FR",
            format!("{}{}", digits(rng, 10), pick(rng, UPPER_DIGIT, 13)),
        ),
        _ => (
            "NL",
            format!(
                "{}{}",
                pick(rng, b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", 4),
                digits(rng, 10)
            ),
        ),
    };
    let numeric: String = format!("{bban}{country}00")
        .chars()
        .map(|c| c.to_digit(36).map_or(String::new(), |d| d.to_string()))
        .collect();
    let rest = numeric
        .bytes()
        .fold(0u32, |r, b| (r * 10 + u32::from(b - b'0')) % 97);
    let compact = format!("{country}{:02}{bban}", 98 - rest);
    if rng.random_bool(0.5) {
        compact
    } else {
        compact
            .as_bytes()
            .chunks(4)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn ipv6(rng: &mut StdRng) -> String {
    let groups: Vec<String> = (0..8)
        .map(|_| format!("{:x}", rng.random::<u16>()))
        .collect();
    match rng.random_range(0..3) {
        0 => groups.join(":"),
        1 => format!("2001:db8::{}:{}", groups[0], groups[1]),
        _ => format!(
            "::ffff:10.{}.{}.{}",
            rng.random::<u8>(),
            rng.random::<u8>(),
            1
        ),
    }
}

fn jwt(rng: &mut StdRng) -> String {
    let header = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9";
    let n = rng.random_range(30..120);
    let payload = format!("eyJ{}", pick(rng, BASE64URL, n));
    format!("{header}.{payload}.{}", pick(rng, BASE64URL, 43))
}

fn api_key(rng: &mut StdRng) -> String {
    match rng.random_range(0..9) {
        0 => format!("sk-{}", pick(rng, ALNUM, 48)),
        1 => format!("sk-proj-{}", pick(rng, BASE64URL, 64)),
        2 => format!("sk-ant-api03-{}", pick(rng, BASE64URL, 80)),
        3 => format!("AKIA{}", pick(rng, UPPER_DIGIT, 16)),
        4 => format!("ghp_{}", pick(rng, ALNUM, 36)),
        5 => format!("github_pat_{}", pick(rng, ALNUM, 60)),
        6 => format!("xoxb-{}-{}", digits(rng, 12), pick(rng, ALNUM, 24)),
        7 => format!("AIza{}", pick(rng, BASE64URL, 35)),
        _ => format!("sk_live_{}", pick(rng, ALNUM, 24)),
    }
}

fn national_id(rng: &mut StdRng) -> String {
    match rng.random_range(0..5) {
        0 => format!("{}-{}-{}", digits(rng, 3), digits(rng, 2), digits(rng, 4)),
        1 => format!(
            "{}{} {} {} {} {}",
            pick(rng, b"ABCEGHJKLMNPRSTWXYZ", 1),
            pick(rng, b"ABCEGHJKLMNPRSTWXYZ", 1),
            digits(rng, 2),
            digits(rng, 2),
            digits(rng, 2),
            pick(rng, b"ABCD", 1)
        ),
        2 => format!("{} {} {}", digits(rng, 4), digits(rng, 4), digits(rng, 4)),
        3 => format!(
            "{}.{}.{}-{}",
            digits(rng, 3),
            digits(rng, 3),
            digits(rng, 3),
            digits(rng, 2)
        ),
        _ => format!(
            "passport number {}{}",
            pick(rng, b"ABCDEFGH", 1),
            digits(rng, 8)
        ),
    }
}

/// Things that are not secrets and must come through.
pub(super) fn look_alike(rng: &mut StdRng) -> String {
    let (a, b, c) = (
        rng.random_range(0..30),
        rng.random_range(0..60),
        rng.random_range(0..200),
    );
    match rng.random_range(0..14) {
        0 => format!("v{a}.{b}.{c}"),
        1 => format!("{a}.{b}.{c}"),
        2 => format!("2.{a}.{b}-beta.{}", c % 9),
        3 => format!("20{:02}-{:02}-{:02}", a % 30, 1 + b % 12, 1 + a % 28),
        4 => format!(
            "20{:02}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            a % 30,
            1 + b % 12,
            1 + a % 28,
            a % 24,
            b,
            b
        ),
        5 => format!("{:02}:{:02}:{:02}", a % 24, b, (b + 7) % 60),
        6 => format!("17{}", digits(rng, 8)),
        7 => format!("17{}", digits(rng, 11)),
        8 => format!("{}", rng.random_range(1..99_999_999u64)),
        9 => format!("{},{:03},{:03}", a + 1, b * 10, c),
        10 => format!("${}.{:02}", rng.random_range(1..99_999), b),
        11 => format!(
            "978-{}-{}-{}-{}",
            a % 9,
            digits(rng, 2),
            digits(rng, 6),
            c % 10
        ),
        12 => format!("{}.{}%", a + 50, c % 10),
        _ => format!("commit {}", hex(rng, 7)),
    }
}

const PROSE: &[&str] = &[
    "Please send the invoice to {} by Friday.",
    "My details: {}. Can you check the account?",
    "The log line says `{}` right before the crash",
    "Customer ({}) called about order 48213 twice.",
    "Summarise this ticket: user reported {}; priority high",
    "{}",
];

/// A request body with `value` placed in a realistic spot, by `shape`.
pub(super) fn body(rng: &mut StdRng, value: &str, shape: usize) -> String {
    let prose = PROSE
        .choose(rng)
        .copied()
        .unwrap_or("{}")
        .replace("{}", value);
    let text = serde_json::to_string(&prose).unwrap_or_default();
    let raw = serde_json::to_string(value).unwrap_or_default();
    match shape % 5 {
        0 => format!(
            r#"{{"model":"gpt-4o-mini","stream":true,"messages":[{{"role":"system","content":"You are helpful."}},{{"role":"user","content":{text}}}],"max_tokens":256}}"#
        ),
        1 => format!(
            r#"{{"model":"claude","messages":[{{"role":"user","content":[{{"type":"text","text":{text}}},{{"type":"image_url","image_url":{{"url":"https://example.com/a.png"}}}}]}}]}}"#
        ),
        2 => {
            let args = serde_json::to_string(&format!(
                r#"{{"customer":{{"note":{text},"contact":{raw}}},"limit":5}}"#
            ))
            .unwrap_or_default();
            format!(
                r#"{{"model":"gpt-4o","messages":[{{"role":"user","content":"look it up"}},{{"role":"assistant","content":null,"tool_calls":[{{"id":"call_1","type":"function","function":{{"name":"crm_lookup","arguments":{args}}}}}]}}]}}"#
            )
        }
        3 => format!(r#"{{"model":"m","prompt":{text},"temperature":0.7,"seed":42}}"#),
        _ => format!(
            r#"{{"input":{{"records":[{{"id":7,"fields":{{"comment":{text},"tags":["a","b"]}}}}]}},"user":"u-1"}}"#
        ),
    }
}
