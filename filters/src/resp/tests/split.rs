//! Any split of a byte stream parses the same: random replies (nested,
//! RESP2 and RESP3) and random requests (arrays and inline), encoded, cut
//! into random pieces and fed piece by piece.

use proptest::prelude::*;

use super::*;

/// A reply value, with what the parser must say about it at top level.
#[derive(Clone, Debug)]
enum Value {
    Simple(u8, String),
    Blob(u8, Vec<u8>),
    Null(&'static [u8]),
    Aggregate(u8, Vec<Value>),
    Map(Vec<(Value, Value)>),
    Attributed(Vec<(Value, Value)>, Box<Value>),
}

impl Value {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Value::Simple(kind, text) => {
                out.push(*kind);
                out.extend_from_slice(text.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Value::Blob(kind, bytes) => {
                out.push(*kind);
                out.extend_from_slice(format!("{}\r\n", bytes.len()).as_bytes());
                out.extend_from_slice(bytes);
                out.extend_from_slice(b"\r\n");
            }
            Value::Null(bytes) => out.extend_from_slice(bytes),
            Value::Aggregate(kind, items) => {
                out.push(*kind);
                out.extend_from_slice(format!("{}\r\n", items.len()).as_bytes());
                items.iter().for_each(|v| v.encode(out));
            }
            Value::Map(pairs) => {
                out.extend_from_slice(format!("%{}\r\n", pairs.len()).as_bytes());
                pairs.iter().for_each(|(k, v)| {
                    k.encode(out);
                    v.encode(out);
                });
            }
            Value::Attributed(pairs, value) => {
                out.extend_from_slice(format!("|{}\r\n", pairs.len()).as_bytes());
                pairs.iter().for_each(|(k, v)| {
                    k.encode(out);
                    v.encode(out);
                });
                value.encode(out);
            }
        }
    }

    fn expected(&self) -> Reply {
        match self {
            Value::Simple(kind, _) | Value::Blob(kind, _) => Reply {
                error: matches!(kind, b'-' | b'!'),
                ..Reply::default()
            },
            Value::Null(_) => Reply {
                null: true,
                ..Reply::default()
            },
            Value::Aggregate(kind, _) => Reply {
                push: *kind == b'>',
                ..Reply::default()
            },
            Value::Map(_) => Reply::default(),
            Value::Attributed(_, value) => value.expected(),
        }
    }
}

fn leaf() -> impl Strategy<Value = Value> {
    let line = "[ -~]{0,12}";
    prop_oneof![
        (prop::sample::select(b"+-:,#(".to_vec()), line).prop_map(|(k, t)| Value::Simple(k, t)),
        (
            prop::sample::select(b"$!=".to_vec()),
            // Payloads hold CR, LF and `*`: they are skipped, never read as protocol.
            prop::collection::vec(prop::sample::select(b"ab\r\n*$0".to_vec()), 0..20)
        )
            .prop_map(|(k, b)| Value::Blob(k, b)),
        prop::sample::select(vec![&b"$-1\r\n"[..], b"*-1\r\n", b"_\r\n"]).prop_map(Value::Null),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            (
                prop::sample::select(b"*~>".to_vec()),
                prop::collection::vec(inner.clone(), 0..5)
            )
                .prop_map(|(k, items)| Value::Aggregate(k, items)),
            prop::collection::vec((inner.clone(), inner.clone()), 0..3).prop_map(Value::Map),
            (
                prop::collection::vec((inner.clone(), inner.clone()), 0..2),
                inner
            )
                .prop_map(|(pairs, v)| Value::Attributed(pairs, Box::new(v))),
        ]
    })
}

/// A request and how it is sent.
#[derive(Clone, Debug)]
struct Sent {
    args: Vec<Vec<u8>>,
    inline: bool,
}

impl Sent {
    fn encode(&self, out: &mut Vec<u8>) {
        if self.inline {
            out.extend_from_slice(&self.args.join(&b' '));
            out.extend_from_slice(b"\r\n");
            return;
        }
        out.extend_from_slice(format!("*{}\r\n", self.args.len()).as_bytes());
        for arg in &self.args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
    }
}

fn sent() -> impl Strategy<Value = Sent> {
    let name = prop::sample::select(vec!["GET", "set", "Ping", "client", "zrangebyscore", "FOO"]);
    let arg = prop::collection::vec(prop::sample::select(b"abz019".to_vec()), 1..12);
    (name, prop::collection::vec(arg, 0..4), any::<bool>()).prop_map(|(name, rest, inline)| {
        let mut args = vec![name.as_bytes().to_vec()];
        args.extend(rest);
        Sent { args, inline }
    })
}

/// `bytes` cut at `cuts` (any values; reduced into range and sorted).
fn pieces(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    at.sort_unstable();
    let mut out = Vec::new();
    let mut from = 0;
    for cut in at.into_iter().chain([bytes.len()]) {
        out.push(bytes[from..cut].to_vec());
        from = cut;
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn replies_parse_the_same_however_split(
        values in prop::collection::vec(value(), 1..8),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let mut bytes = Vec::new();
        values.iter().for_each(|v| v.encode(&mut bytes));
        let want: Vec<Reply> = values.iter().map(Value::expected).collect();

        let mut parser = ReplyParser::default();
        let mut got = Vec::new();
        for piece in pieces(&bytes, &cuts) {
            prop_assert_eq!(parser.feed(&piece, &mut |r| got.push(r)), Ok(()));
        }
        prop_assert_eq!(&got, &want);

        let mut parser = ReplyParser::default();
        let mut by_byte = Vec::new();
        for b in &bytes {
            prop_assert_eq!(parser.feed(&[*b], &mut |r| by_byte.push(r)), Ok(()));
        }
        prop_assert_eq!(&by_byte, &want);
    }

    #[test]
    fn requests_parse_the_same_however_split(
        sent in prop::collection::vec(sent(), 1..10),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let mut bytes = Vec::new();
        sent.iter().for_each(|s| s.encode(&mut bytes));
        let want = requests(&bytes);
        prop_assert!(want.is_ok());
        let names: Vec<&str> = want.iter().flatten().map(|r| r.command.label()).collect();
        let expected: Vec<String> = sent
            .iter()
            .map(|s| String::from_utf8_lossy(&s.args[0]).to_lowercase())
            .map(|n| if n == "foo" { "other".to_owned() } else { n })
            .collect();
        prop_assert_eq!(names, expected);

        let mut parser = RequestParser::default();
        let mut got = Vec::new();
        for piece in pieces(&bytes, &cuts) {
            prop_assert_eq!(parser.feed(&piece, &mut |r| got.push(r)), Ok(()));
        }
        prop_assert_eq!(Ok(got), want.clone());
    }

    #[test]
    fn garbage_fails_the_same_however_split(
        bytes in prop::collection::vec(any::<u8>(), 0..200),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        // Whole or in pieces: the same replies before the same verdict.
        let whole = {
            let mut parser = ReplyParser::default();
            let mut got = Vec::new();
            let verdict = parser.feed(&bytes, &mut |r| got.push(r));
            (got, verdict)
        };
        let split = {
            let mut parser = ReplyParser::default();
            let mut got = Vec::new();
            let mut verdict = Ok(());
            for piece in pieces(&bytes, &cuts) {
                verdict = parser.feed(&piece, &mut |r| got.push(r));
                if verdict.is_err() {
                    break;
                }
            }
            (got, verdict)
        };
        prop_assert_eq!(whole, split);
    }
}
