//! Headers that describe one hop, not the message (RFC 9110 §7.6.1), for the
//! places where sluice builds a request or an answer of its own from another:
//! paced fault streams and shadow copies. `content-length` is in the list
//! because the new message's body sets its own, and `expect` because the
//! client sending the new message handles it itself.

pub const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "content-length",
];
