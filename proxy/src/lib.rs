//! The sluice data plane: everything that holds a socket on a request's path.
//! The pingora HTTP service per listener, the L4 service, the mirror sender,
//! access log and tracing, and [`Sluice::start`], shared by the binary and the
//! end-to-end tests.

mod access_log;
mod fd_table;
mod http_proxy;
mod lifecycle;
mod listener_limits;
mod mirror;
mod runtime_tcp;
mod server;
mod tcp_proxy;
mod telemetry;
mod upstream;

pub use server::{Sluice, StartOptions};
pub use sluice_control::Stop;
pub use telemetry::{Attempt, AttemptTrace, FinishedRequest, GrpcCall, RequestTrace, Tracer};
