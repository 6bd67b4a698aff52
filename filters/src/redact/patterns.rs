//! The built-in redaction patterns and the checks that keep look-alikes:
//! Luhn for cards, mod 97 for IBANs, a real parse for IP addresses, digit
//! counts for phones, randomness for long base64. Word boundaries are ASCII
//! (`(?-u:\b)`) so that the regexes stay on the fast DFA engines.

use regex::Regex;

use super::{RedactionKind, Span};

/// Checks a match at `start..end` of `text`; returns the range to replace
/// (a check may shrink it, e.g. a card number with its CVV after it), or
/// `None` for a look-alike.
type Check = fn(&str, usize, usize) -> Option<(usize, usize)>;

pub(super) struct Pattern {
    pub(super) kind: RedactionKind,
    pub(super) regex: Regex,
    check: Option<Check>,
    /// Replace only capture group 1, not the whole match.
    group: bool,
}

/// The built-in patterns, by kind. Every one is on by default.
pub(super) const BUILT_IN: &[(RedactionKind, &str, Option<Check>)] = &[
    (
        RedactionKind::Jwt,
        "(?-u:\\b)eyJ[A-Za-z0-9_-]{8,}\\.eyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]*",
        None,
    ),
    (
        RedactionKind::Bearer,
        "(?i)(?-u:\\b)bearer[ \\t]+([A-Za-z0-9._~+/=-]{8,})",
        None,
    ),
    (
        RedactionKind::ApiKey,
        "(?-u:\\b)(?:sk-(?:proj-|ant-(?:api[0-9]{2}-)?|live-|test-)?[A-Za-z0-9_-]{20,}\
         |[sr]k_(?:live|test)_[A-Za-z0-9]{16,}\
         |(?:AKIA|ASIA)[0-9A-Z]{16}\
         |gh[pousr]_[A-Za-z0-9]{36,}\
         |github_pat_[A-Za-z0-9_]{22,}\
         |xox[abprs]-[A-Za-z0-9-]{10,}\
         |AIza[0-9A-Za-z_-]{35}\
         |hf_[A-Za-z0-9]{30,}\
         |glpat-[A-Za-z0-9_-]{20})",
        None,
    ),
    (
        RedactionKind::Credential,
        "(?i)(?-u:\\b)(?:password|passwd|pwd|passphrase|secret|api[_-]?key|access[_-]?token\
         |auth[_-]?token|client[_-]?secret|private[_-]?key)[\"']?[ \\t]*[:=][ \\t]*[\"']?\
         ([^\\s\"',;&]{4,})",
        None,
    ),
    (
        RedactionKind::Email,
        "[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\\.[A-Za-z0-9-]+)*\\.[A-Za-z]{2,}(?-u:\\b)",
        None,
    ),
    // International (+CC ...), US (555) 123-4567 / 555-123-4567, and
    // national with a trunk 0 (020 7946 0958, 06 12 34 56 78). A bare run of
    // digits is not a phone: it is more often a timestamp or an id.
    (
        RedactionKind::Phone,
        "\\+[0-9]{1,3}[ .-]?(?:\\([0-9]{1,4}\\)[ .-]?)?[0-9]{1,4}(?:[ .-]?[0-9]{2,4}){1,4}(?-u:\\b)\
         |(?:\\([0-9]{3}\\)[ ]?|(?-u:\\b)[0-9]{3}[ .-])[0-9]{3}[ .-][0-9]{4}(?-u:\\b)\
         |(?-u:\\b)0[0-9]{1,4}(?:[ .-][0-9]{2,4}){2,4}(?-u:\\b)",
        Some(phone),
    ),
    (
        RedactionKind::Card,
        "(?-u:\\b)[0-9](?:[ -]?[0-9]){12,18}(?-u:\\b)",
        Some(card),
    ),
    (
        RedactionKind::Iban,
        "(?-u:\\b)[A-Z]{2}[0-9]{2}(?:[ ]?[A-Z0-9]{1,4}){3,8}(?-u:\\b)",
        Some(iban),
    ),
    (
        RedactionKind::Ip,
        "(?-u:\\b)(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\
         (?:\\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}(?-u:\\b)",
        Some(ipv4),
    ),
    (
        RedactionKind::Ip,
        "(?i)[0-9a-f]{0,4}:[0-9a-f]{0,4}:[0-9a-f:.]*",
        Some(ipv6),
    ),
    // SSN, UK NINO, Aadhaar, CPF; then any id after a word that names one.
    (
        RedactionKind::NationalId,
        "(?-u:\\b)(?:[0-9]{3}-[0-9]{2}-[0-9]{4}\
         |[A-CEGHJ-PR-TW-Z]{2} ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-D]\
         |[0-9]{4} [0-9]{4} [0-9]{4}\
         |[0-9]{3}\\.[0-9]{3}\\.[0-9]{3}-[0-9]{2})(?-u:\\b)",
        None,
    ),
    (
        RedactionKind::NationalId,
        "(?i)(?-u:\\b)(?:ssn|social security(?: number)?|passport(?: number| no\\.?)?\
         |national id(?:entity)?(?: number| no\\.?)?|id number|tax id|personal id|dni|nif|nie\
         |cpf|aadhaar|personnummer|bsn|sin)(?-u:\\b)[^A-Za-z0-9]{0,4}(?:is )?\
         ([A-Za-z0-9](?:[A-Za-z0-9]|[ .-][0-9]){4,18})",
        Some(id_digits),
    ),
    (
        RedactionKind::Secret,
        "(?-u:\\b)[0-9a-fA-F]{32,}(?-u:\\b)",
        Some(hex),
    ),
    (RedactionKind::Secret, "[A-Za-z0-9+/_-]{32,}={0,2}", Some(base64)),
];

/// Compiles the built-in patterns. They are constants, covered by the
/// tests: one that did not compile would fail every test that redacts.
pub(super) fn built_in() -> Vec<Pattern> {
    BUILT_IN
        .iter()
        .filter_map(|(kind, source, check)| {
            Some(Pattern::new(*kind, Regex::new(source).ok()?, *check))
        })
        .collect()
}

impl Pattern {
    fn new(kind: RedactionKind, regex: Regex, check: Option<Check>) -> Pattern {
        let group = regex.captures_len() > 1;
        Pattern {
            kind,
            regex,
            check,
            group,
        }
    }

    pub(super) fn custom(regex: Regex) -> Pattern {
        Pattern::new(RedactionKind::Custom, regex, None)
    }

    /// Every checked match in `text`.
    pub(super) fn find<'a>(&'a self, text: &'a str) -> impl Iterator<Item = Span> + 'a {
        let ranges: Box<dyn Iterator<Item = (usize, usize)> + 'a> = if self.group {
            Box::new(self.regex.captures_iter(text).filter_map(|c| {
                let m = c.get(1).or_else(|| c.get(0))?;
                Some((m.start(), m.end()))
            }))
        } else {
            Box::new(self.regex.find_iter(text).map(|m| (m.start(), m.end())))
        };
        ranges.filter_map(move |(start, end)| {
            let (start, end) = match self.check {
                Some(check) => check(text, start, end)?,
                None => (start, end),
            };
            (end > start).then_some(Span {
                start,
                end,
                kind: self.kind,
            })
        })
    }
}

fn digits(s: &str) -> impl Iterator<Item = u32> + '_ {
    s.bytes()
        .filter(u8::is_ascii_digit)
        .map(|b| u32::from(b - b'0'))
}

fn phone(text: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    let m = &text[start..end];
    let n = digits(m).count();
    let ok = if m.starts_with('+') {
        (8..=15).contains(&n)
    } else if m.starts_with('0') {
        (9..=12).contains(&n)
    } else {
        n == 10
    };
    ok.then_some((start, end))
}

/// Luhn-valid with 13 to 19 digits and a card network's first digit (2 to
/// 6: Mastercard, Amex, Diners, JCB, Visa, Discover); when the whole run is
/// not, its longest valid prefix that ends at a separator (a card number and
/// then a CVV). The first digit keeps millisecond timestamps (`17...`) and
/// ISBNs (`978-...`), which pass Luhn one time in ten.
fn card(text: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    let m = &text[start..end];
    if !matches!(m.as_bytes().first(), Some(b'2'..=b'6')) {
        return None;
    }
    let mut cut = end;
    loop {
        let n = digits(&text[start..cut]).count();
        if (13..=19).contains(&n) && luhn(&text[start..cut]) {
            return Some((start, cut));
        }
        cut = start + m[..cut - start].rfind([' ', '-'])?;
    }
}

fn luhn(s: &str) -> bool {
    let all: Vec<u32> = digits(s).collect();
    let sum: u32 = all
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| match (i % 2, d * 2) {
            (1, twice) if twice > 9 => twice - 9,
            (1, twice) => twice,
            _ => d,
        })
        .sum();
    sum.is_multiple_of(10)
}

/// Mod-97 valid with 15 to 34 characters; else the longest valid prefix
/// that ends at a space (the next word may have been taken as a group).
fn iban(text: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    let mut cut = end;
    loop {
        let compact: String = text[start..cut].chars().filter(|c| *c != ' ').collect();
        if (15..=34).contains(&compact.len()) && mod97(&compact) == 1 {
            return Some((start, cut));
        }
        cut = start + text[start..cut].rfind(' ')?;
    }
}

/// ISO 13616: move the first four characters to the end, letters to
/// numbers (A = 10), the whole as one number mod 97.
fn mod97(iban: &str) -> u32 {
    let (head, tail) = iban.split_at(4.min(iban.len()));
    let mut rest = 0u32;
    for c in tail.chars().chain(head.chars()) {
        let value = match c.to_digit(36) {
            Some(v) => v,
            None => return 0,
        };
        rest = if value < 10 {
            (rest * 10 + value) % 97
        } else {
            (rest * 100 + value) % 97
        };
    }
    rest
}

/// Not part of a longer dotted run: `1.2.3.4.5` is a version, not an address.
fn ipv4(text: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let dotted_before = start >= 2 && bytes[start - 1] == b'.' && bytes[start - 2].is_ascii_digit();
    let dotted_after =
        end + 1 < bytes.len() && bytes[end] == b'.' && bytes[end + 1].is_ascii_digit();
    (!dotted_before && !dotted_after).then_some((start, end))
}

/// A run of hex, colons and dots that parses as an IPv6 address, trailing
/// punctuation aside, not inside a word, and not code (`a::b`): it holds a
/// decimal digit or at least four groups.
fn ipv6(text: &str, start: usize, mut end: usize) -> Option<(usize, usize)> {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b':';
    let bytes = text.as_bytes();
    if (start > 0 && word(bytes[start - 1])) || (end < bytes.len() && word(bytes[end])) {
        return None;
    }
    while end > start && matches!(bytes[end - 1], b'.') {
        end -= 1;
    }
    let mut candidate = &text[start..end];
    if candidate.parse::<std::net::Ipv6Addr>().is_err() {
        // `fe80::1:` ends a clause with a colon.
        candidate = candidate.strip_suffix(':')?;
        candidate.parse::<std::net::Ipv6Addr>().ok()?;
        end -= 1;
    }
    let groups = candidate.split(':').filter(|g| !g.is_empty()).count();
    (candidate.bytes().any(|b| b.is_ascii_digit()) || groups >= 4).then_some((start, end))
}

/// An id named by a keyword has at least five digits.
fn id_digits(text: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    (digits(&text[start..end]).count() >= 5).then_some((start, end))
}

/// Hex that mixes digits and letters (a run of one is a number or a word).
fn hex(text: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    let m = &text.as_bytes()[start..end];
    let digit = m.iter().any(u8::is_ascii_digit);
    let letter = m.iter().any(u8::is_ascii_alphabetic);
    (digit && letter).then_some((start, end))
}

/// Base64 that looks random: both cases, not made of words (a path or an
/// identifier: `/Users/JohnSmith/src`, `getUserAccount2024`), and the class
/// of adjacent alphanumerics (upper, lower, digit) changes often: on about
/// 62% of pairs in random base64, under 25% in text. The cut is 30%.
fn base64(text: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    let m = &text.as_bytes()[start..end];
    let class = |b: u8| match b {
        b'A'..=b'Z' => Some(0u8),
        b'a'..=b'z' => Some(1),
        b'0'..=b'9' => Some(2),
        _ => None,
    };
    let upper = m.iter().any(u8::is_ascii_uppercase);
    let lower = m.iter().any(u8::is_ascii_lowercase);
    let (mut pairs, mut changes) = (0u32, 0u32);
    for w in m.windows(2) {
        if let (Some(a), Some(b)) = (class(w[0]), class(w[1])) {
            pairs += 1;
            changes += u32::from(a != b);
        }
    }
    let random = pairs >= 16 && f64::from(changes) >= 0.3 * f64::from(pairs);
    (upper && lower && random && !words(m)).then_some((start, end))
}

/// Made of words: lowercase runs of two or more, each with at most one
/// capital before it, numbers, and separators. Random base64 of 32
/// characters or more almost never is: it has lone lowercase letters and
/// capitals side by side.
fn words(m: &[u8]) -> bool {
    let mut i = 0;
    while i < m.len() {
        let run =
            |from: usize, pred: fn(&u8) -> bool| m[from..].iter().take_while(|b| pred(b)).count();
        match m[i] {
            b'0'..=b'9' => i += run(i, u8::is_ascii_digit),
            b'A'..=b'Z' | b'a'..=b'z' => {
                let capital = usize::from(m[i].is_ascii_uppercase());
                let lower = run(i + capital, u8::is_ascii_lowercase);
                if lower < 2 {
                    return false;
                }
                i += capital + lower;
            }
            _ => i += 1,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_pattern_compiles() {
        assert_eq!(built_in().len(), BUILT_IN.len());
    }

    #[test]
    fn checks() {
        assert!(luhn("4111 1111 1111 1111"));
        assert!(!luhn("4111 1111 1111 1112"));
        assert_eq!(mod97("DE89370400440532013000"), 1);
        assert_eq!(mod97("GB82WEST12345698765432"), 1);
        assert_ne!(mod97("GB82WEST12345698765433"), 1);
        let text = "pay 4111 1111 1111 1111 123 now";
        assert_eq!(card(text, 4, 27), Some((4, 23)));
        assert_eq!(ipv4("v 1.2.3.4.5", 2, 9), None);
        assert_eq!(ipv6("at fe80::1:", 3, 11), Some((3, 10)));
        assert_eq!(ipv6("use a::b", 4, 8), None);
        assert_eq!(ipv6("at 12:30:45", 3, 11), None);
        assert!(words(b"getUserAccountBalanceForCustomer2024"));
        assert!(words(b"/Users/JohnSmith/Documents/Project2024/src"));
        assert!(!words(b"AbCdEf1234GhIjKl5678MnOpQr9012StUvWx"));
    }
}
