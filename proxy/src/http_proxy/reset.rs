//! The `reset` fault: the client's connection ends with a TCP RST, not a FIN.
//! Closing a socket whose SO_LINGER is on with a zero timeout makes the kernel
//! send RST (and drop anything unsent). pingora hands out no socket, only the
//! descriptor's number (`UniqueID::id`), so this is one of sluice's two
//! `unsafe` blocks (the other owns the sockets a graceful upgrade receives,
//! `server/handover.rs`): borrowing that descriptor for the setsockopt.

use std::os::fd::BorrowedFd;
use std::time::Duration;

use pingora::proxy::Session;

/// Arms the client's socket so that closing it sends RST. False where there
/// is no socket of the client's own to reset (HTTP/2: one request is one
/// stream of a shared connection; pingora resets just that stream, CANCEL).
pub(super) fn arm(session: &Session) -> bool {
    let Some(stream) = session.as_downstream().stream() else {
        return false;
    };
    let fd = stream.id();
    if fd < 0 {
        return false;
    }
    // SAFETY: `fd` is the descriptor of the client's socket, owned by `stream`,
    // which is borrowed for longer than `socket` lives; nothing here closes it.
    #[allow(unsafe_code)]
    let socket = unsafe { BorrowedFd::borrow_raw(fd) };
    socket2::SockRef::from(&socket)
        .set_linger(Some(Duration::ZERO))
        .is_ok()
}
