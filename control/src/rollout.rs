//! Progressive delivery: each rollout raises a canary cluster's weight on a
//! route step by step and takes it back to 0 the moment an SLA gate is
//! breached. `policy` is the pure state machine, `gates` judges what the
//! stats windows and observers saw, `controller` runs one rollout as an
//! owned task, `registry` keeps every rollout of the live config running.

mod controller;
mod gates;
mod policy;
mod registry;
mod status;

pub use controller::Signals;
pub use gates::{GateReading, Observation};
pub use policy::{Command, Policy, State, Transition};
pub use registry::{RolloutError, Rollouts};
pub use status::{RolloutEvent, RolloutStatus};

#[cfg(test)]
mod tests;
