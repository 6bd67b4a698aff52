//! A graceful upgrade's sockets. The running sluice, on SIGQUIT, sends its
//! listening sockets (every listener's and the admin API's) to the new one
//! (`sluice run --upgrade`) over the Unix socket `runtime.upgrade_sock`, in
//! pingora's format (`pingora::server::Fds`: each socket under a key, all in
//! one message); the new one listens on those same kernel sockets, so a
//! connection is never refused in between: what the old one no longer
//! accepts waits in the socket's queue for the new one.
//!
//! pingora's own upgrade path (`ShutdownSignal::GracefulUpgrade`) is not
//! used whole: after sending, it lets both accept for a fixed 5 s, then
//! gives requests in flight `graceful_shutdown_timeout_seconds` before
//! dropping them. sluice stops accepting as soon as the sockets are sent and
//! drains until nothing is in flight (up to `runtime.grace_period`), the
//! drain SIGTERM runs; so it sends and receives with pingora's `Fds` and
//! leaves the rest to its own stop.
//!
//! Keys: a listener's socket goes under its bound address, so the new
//! process takes it for the listener configured at that same address; the
//! admin API's goes under [`ADMIN_KEY`].

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use pingora::server::Fds;
use sluice_control::HandOverError;
use tokio::sync::watch;
use tracing::{info, warn};

/// The admin API's socket's key.
pub(crate) const ADMIN_KEY: &str = "admin";

/// pingora's receiver takes at most 32 descriptors in one message.
const MAX_SOCKETS: usize = 32;

/// The sockets received from the process being upgraded, by key; what no
/// listener takes is closed.
#[derive(Default)]
pub(crate) struct Inherited(HashMap<String, OwnedFd>);

impl Inherited {
    /// Listens on `path` until the running sluice sends its sockets (it
    /// does on SIGQUIT), up to `wait`.
    pub(crate) fn receive(path: &Path, wait: Duration) -> anyhow::Result<Inherited> {
        let shown = path.display();
        let text = path
            .to_str()
            .ok_or_else(|| anyhow!("runtime.upgrade_sock {shown}: not UTF-8"))?;
        // pingora's receiver panics when it cannot bind the path: say why first.
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir.filter(|d| !d.is_dir()) {
            bail!(
                "runtime.upgrade_sock {shown}: directory {} does not exist",
                dir.display()
            );
        }
        info!(path = %shown, "waiting for the running sluice's sockets (send it SIGQUIT)");
        let deadline = Instant::now() + wait;
        let mut fds = Fds::new();
        // One try waits about 6 s for the old process to connect; a SIGQUIT
        // sent between two tries still lands, as the sender retries.
        loop {
            let error = match fds.get_from_sock(text) {
                Ok(()) => break,
                Err(e) => std::io::Error::from(e),
            };
            let nobody_came = error.kind() == std::io::ErrorKind::WouldBlock;
            if !nobody_came || Instant::now() >= deadline {
                bail!(
                    "no sockets came on runtime.upgrade_sock {shown} within {wait:?} ({error}): \
                     send SIGQUIT to the running sluice once this one waits"
                );
            }
        }
        let (keys, raw) = fds.serialize();
        let sockets: HashMap<String, OwnedFd> =
            keys.into_iter().zip(raw.into_iter().map(own)).collect();
        info!(sockets = sockets.len(), "sockets received");
        Ok(Inherited(sockets))
    }

    /// The socket sent under `key`, if any.
    pub(crate) fn take(&mut self, key: &str) -> Option<OwnedFd> {
        self.0.remove(key)
    }

    /// The admin API's socket, when it listens on `addr` (an `admin.listen`
    /// changed, or on port 0, gets a new socket; the old one is closed).
    pub(crate) fn take_admin(&mut self, addr: SocketAddr) -> Option<TcpListener> {
        let socket = TcpListener::from(self.take(ADMIN_KEY)?);
        match socket.local_addr() {
            Ok(bound) if bound == addr => Some(socket),
            bound => {
                warn!(?bound, configured = %addr, "the inherited admin socket is not at admin.listen; closed");
                None
            }
        }
    }

    /// Closes the sockets no listener took (one the new config dropped or
    /// moved): left open, they would queue connections nobody accepts.
    pub(crate) fn close_rest(self) {
        for key in self.0.into_keys() {
            warn!(socket = %key, "an inherited socket fits no listener of this config; closed");
        }
    }
}

/// Takes ownership of a descriptor pingora's `Fds` received: it came over
/// `SCM_RIGHTS` into a table only this module holds, so nothing else owns
/// or closes it.
#[allow(unsafe_code)]
fn own(fd: RawFd) -> OwnedFd {
    // SAFETY: `fd` is open (the kernel installed it on receipt) and owned by
    // nobody else (see above); it is taken here once.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// The sending side: copies of the listening sockets to send, and the
/// signal that tells the listeners to stop accepting once they are sent.
pub(crate) struct Handover {
    path: PathBuf,
    sockets: parking_lot::Mutex<Vec<(String, OwnedFd)>>,
    /// Set once sluice has started: a SIGQUIT before sends nothing.
    armed: AtomicBool,
    handed_over: watch::Sender<bool>,
}

impl Handover {
    pub(crate) fn new(path: PathBuf) -> Handover {
        Handover {
            path,
            sockets: parking_lot::Mutex::new(Vec::new()),
            armed: AtomicBool::new(false),
            handed_over: watch::channel(false).0,
        }
    }

    /// `socket` goes to the new process under `key`.
    pub(crate) fn add(&self, key: String, socket: OwnedFd) {
        self.sockets.lock().push((key, socket));
    }

    /// Every socket is in: hand-overs may go ahead.
    pub(crate) fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    /// Turns true once the sockets are the new process's.
    pub(crate) fn handed_over(&self) -> watch::Receiver<bool> {
        self.handed_over.subscribe()
    }

    /// Whether the sockets are the new process's.
    pub(crate) fn is_done(&self) -> bool {
        *self.handed_over.borrow()
    }

    /// Sends every socket to the process listening on the upgrade socket
    /// (pingora's sender waits about 5 s for it), then tells the listeners to
    /// stop accepting. The number sent.
    pub(crate) fn send(&self) -> Result<usize, HandOverError> {
        let failed = |why: String| {
            HandOverError(format!(
                "runtime.upgrade_sock {}: {why}",
                self.path.display()
            ))
        };
        if !self.armed.load(Ordering::SeqCst) {
            return Err(failed("sluice is still starting".into()));
        }
        let mut sockets = self.sockets.lock();
        if *self.handed_over.borrow() {
            return Err(failed("the sockets were handed over already".into()));
        }
        if sockets.len() > MAX_SOCKETS {
            return Err(failed(format!(
                "{} sockets, over the {MAX_SOCKETS} one hand-over carries",
                sockets.len()
            )));
        }
        let path = self
            .path
            .to_str()
            .ok_or_else(|| failed("not UTF-8".into()))?;
        let mut fds = Fds::new();
        for (key, socket) in sockets.iter() {
            fds.add(key.clone(), socket.as_raw_fd());
        }
        fds.send_to_sock(path).map_err(|e| {
            failed(format!(
                "{e}; start `sluice run --upgrade` first, it waits there"
            ))
        })?;
        let sent = sockets.len();
        // These copies close; the sockets live on in the new process.
        sockets.clear();
        self.handed_over.send_replace(true);
        Ok(sent)
    }
}
