//! RESP (the Redis protocol) awareness for `kind: cache` clusters: pure,
//! incremental parsers of requests and replies, and the session that pairs
//! pipelined replies with their requests. The proxy feeds it the bytes it
//! copies; nothing here touches a socket or reads a clock.

mod command;
mod length;
mod reply;
mod request;
mod session;

pub use command::Command;
pub use reply::{Reply, ReplyParser};
pub use request::{ClientReply, Request, RequestParser};
pub use session::{Exchange, Fallback, RespSession};

/// Why a byte stream is not RESP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RespError {
    #[error("unexpected type byte 0x{0:02x}")]
    BadType(u8),
    #[error("bad length or count")]
    BadLength,
    #[error("missing CRLF")]
    MissingCrlf,
    #[error("inline command longer than 64 KiB")]
    InlineTooLong,
}

#[cfg(test)]
mod tests;
