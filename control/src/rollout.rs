//! Progressive delivery: each rollout raises a canary cluster's weight on a
//! route step by step and takes it back to 0 the moment an SLA gate is
//! breached. `policy` is the pure state machine, `gates` judges what the
//! stats windows and observers saw (or Prometheus: `source`, `promql`),
//! `controller` runs one rollout as an owned task, `live` writes its
//! weights to this instance's config, `fleet` applies them through other
//! instances' control APIs (listed or found in DNS) and keeps them there, `registry` keeps every rollout of the live
//! config running and the finished ones in its history.

mod controller;
mod fleet;
mod gates;
mod live;
mod policy;
mod promql;
mod registry;
mod source;
mod status;

pub use fleet::{DiscoveryStatus, TargetStatus};
pub use gates::{Figure, Figures, GateReading, Observation};
pub use policy::{Command, Policy, State, Transition};
pub use registry::{RolloutError, Rollouts};
pub use source::Signals;
pub use status::{EventLineage, RolloutEvent, RolloutStatus, SourceStatus};

#[cfg(test)]
mod tests;
