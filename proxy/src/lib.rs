//! The sluice data plane and CLI plumbing: everything that holds a socket.

mod access_log;
pub mod ctl;
mod defaults;
mod demo;
mod fd_table;
mod http_proxy;
mod lifecycle;
mod mirror;
mod mock_llm;
mod server;
mod tcp_proxy;
mod telemetry;

pub use defaults::{default_config_yaml, MockThread};
pub use demo::{run_demo, DemoOptions};
pub use lifecycle::Stop;
pub use mock_llm::{MockKnobs, MockLlm, MockLlmOptions};
pub use server::{Sluice, StartOptions};
pub use telemetry::{Attempt, AttemptTrace, FinishedRequest, RequestTrace, Tracer};
