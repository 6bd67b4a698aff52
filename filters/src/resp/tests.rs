//! RESP parser and session tests; the split-anywhere properties are in
//! `tests/split.rs`.

use super::*;

mod split;

fn replies(bytes: &[u8]) -> Result<Vec<Reply>, RespError> {
    let mut parser = ReplyParser::default();
    let mut out = Vec::new();
    parser.feed(bytes, &mut |r| out.push(r))?;
    Ok(out)
}

fn requests(bytes: &[u8]) -> Result<Vec<Request>, RespError> {
    let mut parser = RequestParser::default();
    let mut out = Vec::new();
    parser.feed(bytes, &mut |r| out.push(r))?;
    Ok(out)
}

const OK: Reply = Reply {
    error: false,
    null: false,
    push: false,
};
const ERR: Reply = Reply {
    error: true,
    null: false,
    push: false,
};
const NULL: Reply = Reply {
    error: false,
    null: true,
    push: false,
};
const PUSH: Reply = Reply {
    error: false,
    null: false,
    push: true,
};

#[test]
fn every_resp2_reply_type() {
    let cases: &[(&[u8], Reply)] = &[
        (b"+OK\r\n", OK),
        (b"-ERR wrong\r\n", ERR),
        (b":-42\r\n", OK),
        (b"$3\r\nfoo\r\n", OK),
        (b"$0\r\n\r\n", OK),
        (b"$4\r\n\r\n\r\n\r\n", OK),
        (b"$-1\r\n", NULL),
        (b"*-1\r\n", NULL),
        (b"*0\r\n", OK),
        (b"*2\r\n$1\r\na\r\n$-1\r\n", OK),
        // An error or null inside an array does not make the reply one.
        (b"*2\r\n*2\r\n:1\r\n-ERR x\r\n*0\r\n", OK),
    ];
    for (bytes, want) in cases {
        let text = String::from_utf8_lossy(bytes);
        assert_eq!(replies(bytes), Ok(vec![*want]), "{text}");
    }
}

#[test]
fn every_resp3_reply_type() {
    let cases: &[(&[u8], Reply)] = &[
        (b"_\r\n", NULL),
        (b",3.14\r\n", OK),
        (b"#t\r\n", OK),
        (b"(3492890328409238509324850943850943825024385\r\n", OK),
        (b"!21\r\nSYNTAX invalid syntax\r\n", ERR),
        (b"=15\r\ntxt:Some string\r\n", OK),
        (b"%2\r\n+first\r\n:1\r\n+second\r\n*1\r\n_\r\n", OK),
        (b"%0\r\n", OK),
        (b"~3\r\n:1\r\n:2\r\n#f\r\n", OK),
        (b">3\r\n+message\r\n+chan\r\n$2\r\nhi\r\n", PUSH),
        // An attribute annotates the reply after it; the reply decides the class.
        (
            b"|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n-ERR x\r\n",
            ERR,
        ),
        (b"|1\r\n+k\r\n*1\r\n:1\r\n_\r\n", NULL),
        (b"*2\r\n|1\r\n+ttl\r\n:3600\r\n:1\r\n-ERR inner\r\n", OK),
    ];
    for (bytes, want) in cases {
        let text = String::from_utf8_lossy(bytes);
        assert_eq!(replies(bytes), Ok(vec![*want]), "{text}");
    }
}

#[test]
fn replies_in_a_row_come_out_in_order() {
    let got = replies(b"+OK\r\n$-1\r\n-ERR a\r\n*1\r\n:1\r\n>1\r\n+p\r\n_\r\n");
    assert_eq!(got, Ok(vec![OK, NULL, ERR, OK, PUSH, NULL]));
}

#[test]
fn malformed_replies_are_errors() {
    let cases: &[(&[u8], RespError)] = &[
        (b"hello\r\n", RespError::BadType(b'h')),
        (b"$3\r\nfoox\r\n", RespError::MissingCrlf),
        (b"$-2\r\n", RespError::BadLength),
        (b"$?\r\n;3\r\nabc\r\n;0\r\n", RespError::BadLength),
        (b"*1x\r\n", RespError::BadLength),
        (b"+OK\rX", RespError::MissingCrlf),
        (b"$3\r\r", RespError::MissingCrlf),
        (b"|-1\r\n", RespError::BadLength),
        (b"%9999999999999999999\r\n", RespError::BadLength),
    ];
    for (bytes, want) in cases {
        let text = String::from_utf8_lossy(bytes);
        assert_eq!(replies(bytes), Err(*want), "{text}");
    }
}

#[test]
fn a_huge_bulk_is_skipped_by_length_not_kept() {
    let mut parser = ReplyParser::default();
    let mut count = 0;
    parser
        .feed(b"$100000000\r\n", &mut |_| count += 1)
        .unwrap_or_else(|e| unreachable!("{e}"));
    let block = vec![b'x'; 1 << 20];
    for _ in 0..95 {
        parser
            .feed(&block, &mut |_| count += 1)
            .unwrap_or_else(|e| unreachable!("{e}"));
    }
    let rest = vec![b'y'; 100_000_000 - 95 * (1 << 20)];
    parser
        .feed(&rest, &mut |_| count += 1)
        .unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(count, 0);
    parser
        .feed(b"\r\n+OK\r\n", &mut |_| count += 1)
        .unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(count, 2);
    // All the state there is: no buffer grows with the input.
    assert!(std::mem::size_of::<ReplyParser>() <= 64);
    assert!(std::mem::size_of::<RequestParser>() <= 128);
}

fn named(label: &str) -> Request {
    Request {
        command: Command::named(label),
        client_reply: None,
    }
}

#[test]
fn arrays_of_bulk_strings_name_their_command() {
    let bytes = b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n*3\r\n$3\r\nset\r\n$1\r\nk\r\n$0\r\n\r\n\
                  *1\r\n$4\r\nPING\r\n*1\r\n$20\r\nNOSUCHCOMMANDATALL12\r\n";
    let got = requests(bytes);
    let other = Request {
        command: Command::OTHER,
        client_reply: None,
    };
    assert_eq!(
        got,
        Ok(vec![named("get"), named("set"), named("ping"), other])
    );
}

#[test]
fn inline_commands_and_blank_lines() {
    let got = requests(b"PING\r\nget  foo\n\r\n   \n\tset a b\r\nECHO\r\n");
    assert_eq!(
        got,
        Ok(vec![
            named("ping"),
            named("get"),
            named("set"),
            named("echo")
        ])
    );
}

#[test]
fn empty_and_null_arrays_are_no_request() {
    assert_eq!(
        requests(b"*0\r\n*-1\r\n*1\r\n$4\r\nping\r\n"),
        Ok(vec![named("ping")])
    );
}

#[test]
fn client_reply_modes_are_seen_in_both_forms() {
    let got = requests(
        b"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$3\r\nOFF\r\nclient reply on\r\n\
          CLIENT REPLY SKIP\r\nCLIENT SETNAME x\r\n",
    );
    let mode = |m| Request {
        command: Command::named("client"),
        client_reply: Some(m),
    };
    assert_eq!(
        got,
        Ok(vec![
            mode(ClientReply::Off),
            mode(ClientReply::On),
            mode(ClientReply::Skip),
            named("client"),
        ])
    );
}

#[test]
fn malformed_requests_are_errors() {
    let cases: &[(&[u8], RespError)] = &[
        (b"*2\r\n$3\r\nGET\r\n:1\r\n", RespError::BadType(b':')),
        (b"*x\r\n", RespError::BadLength),
        (b"*1\r\n$-1\r\n", RespError::BadLength),
        (b"*1\r\n$3\r\nGETX\r\n", RespError::MissingCrlf),
        (b"*1\n", RespError::BadLength),
    ];
    for (bytes, want) in cases {
        let text = String::from_utf8_lossy(bytes);
        assert_eq!(requests(bytes), Err(*want), "{text}");
    }
    let long_line = vec![b'a'; 64 * 1024 + 1];
    assert_eq!(requests(&long_line), Err(RespError::InlineTooLong));
}

/// Feeds a session requests at `sent` and replies at `received` (ns).
fn exchanges(
    session: &mut RespSession,
    sent: &[(&[u8], u64)],
    received: &[(&[u8], u64)],
) -> Vec<Exchange> {
    let mut out = Vec::new();
    for (bytes, at) in sent {
        assert_eq!(session.requests_sent(bytes, *at), Ok(()));
    }
    for (bytes, at) in received {
        assert_eq!(
            session.replies_received(bytes, *at, &mut |e| out.push(e)),
            Ok(())
        );
    }
    out
}

#[test]
fn pipelined_replies_pair_first_in_first_out() {
    let mut session = RespSession::default();
    let got = exchanges(
        &mut session,
        &[
            (
                b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n",
                100,
            ),
            (b"GET a\r\nINCR a\r\n", 200),
        ],
        &[
            (b"$-1\r\n+OK\r\n$1\r", 1_000),
            (b"\n1\r\n-ERR not an integer\r\n", 1_500),
        ],
    );
    let ex = |label, error, null, latency_ns| Exchange {
        command: Command::named(label),
        error,
        null,
        queued: false,
        latency_ns,
    };
    assert_eq!(
        got,
        vec![
            ex("get", false, true, 900),
            ex("set", false, false, 900),
            ex("get", false, false, 1_300),
            ex("incr", true, false, 1_300),
        ]
    );
    assert_eq!(got[0].get_hit(), Some(false));
    assert_eq!(got[1].get_hit(), None);
    assert_eq!(got[2].get_hit(), Some(true));
    assert!(session.observing());
}

#[test]
fn client_reply_off_and_skip_leave_no_reply_to_pair() {
    let mut session = RespSession::default();
    let got = exchanges(
        &mut session,
        &[(
            b"CLIENT REPLY OFF\r\nSET a 1\r\nCLIENT REPLY SKIP\r\nCLIENT REPLY ON\r\n\
              CLIENT REPLY SKIP\r\nSET b 2\r\nGET a\r\n",
            10,
        )],
        &[(b"+OK\r\n$1\r\n1\r\n", 20)],
    );
    let labels: Vec<_> = got.iter().map(|e| e.command.label()).collect();
    assert_eq!(labels, ["client", "get"]);
    assert!(session.observing());
}

#[test]
fn pushes_are_not_paired() {
    let mut session = RespSession::default();
    let got = exchanges(
        &mut session,
        &[(b"PING\r\n", 1)],
        &[(b">2\r\n+invalidate\r\n*1\r\n$1\r\nk\r\n+PONG\r\n", 2)],
    );
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].command.label(), "ping");
}

#[test]
fn the_session_stops_once_and_says_why() {
    let mut session = RespSession::default();
    assert_eq!(
        session.requests_sent(b"*1\r\n:1\r\n", 1),
        Err(Fallback::BadRequest)
    );
    assert!(!session.observing());
    // Stopped: everything after is ignored, and nothing is counted twice.
    assert_eq!(session.requests_sent(b"garbage", 2), Ok(()));
    assert_eq!(session.replies_received(b"garbage", 3, &mut |_| {}), Ok(()));

    let mut session = RespSession::default();
    assert_eq!(
        session.replies_received(b"+OK\r\n", 1, &mut |_| {}),
        Err(Fallback::UnpairedReply)
    );

    let mut session = RespSession::default();
    assert_eq!(session.requests_sent(b"GET a\r\n", 1), Ok(()));
    assert_eq!(
        session.replies_received(b"?\r\n", 1, &mut |_| {}),
        Err(Fallback::BadReply)
    );

    let mut session = RespSession::default();
    assert_eq!(
        session.requests_sent(b"PING\r\nSUBSCRIBE news\r\n", 1),
        Err(Fallback::UntrackedCommand)
    );

    let mut session = RespSession::default();
    let many = b"PING\r\n".repeat(session::MAX_IN_FLIGHT + 1);
    assert_eq!(
        session.requests_sent(&many, 1),
        Err(Fallback::TooManyInFlight)
    );

    let reasons: Vec<_> = Fallback::ALL.iter().map(|f| f.reason()).collect();
    assert_eq!(
        reasons,
        [
            "bad_request",
            "bad_reply",
            "unpaired_reply",
            "untracked_command",
            "too_many_in_flight"
        ]
    );
    assert!(Fallback::ALL
        .iter()
        .enumerate()
        .all(|(i, f)| f.index() == i));
}

#[test]
fn a_get_queued_in_a_transaction_is_neither_hit_nor_miss() {
    let mut session = RespSession::default();
    let got = exchanges(
        &mut session,
        &[(b"MULTI\r\nGET a\r\nEXEC\r\nGET a\r\n", 1)],
        &[(b"+OK\r\n+QUEUED\r\n*1\r\n$1\r\n1\r\n$-1\r\n", 2)],
    );
    let seen: Vec<_> = got
        .iter()
        .map(|e| (e.command.label(), e.queued, e.get_hit()))
        .collect();
    assert_eq!(
        seen,
        [
            ("multi", false, None),
            ("get", true, None),
            ("exec", false, None),
            ("get", false, Some(false)),
        ]
    );
}
